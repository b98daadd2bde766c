"""Plain aligned text tables for kadmin's output (no dependencies beyond the standard library)."""
from __future__ import annotations


def table(header: list[str], rows: list[list[str]], indent: str = "") -> list[str]:
    """Left-aligned columns two spaces apart; no trailing spaces."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    return [(indent + "  ".join(str(c).ljust(w) for c, w in zip(r, widths))).rstrip() for r in [header] + rows]
