"""Coordinators: producer ids now; the group coordinator and offsets manager (and transactions) later."""
