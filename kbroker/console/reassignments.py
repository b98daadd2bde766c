"""Reassignments in progress: each partition being moved (ListPartitionReassignments at the controller) with its
replicas now, the replicas being added and those being removed, and a Cancel button (confirmed) that sends
AlterPartitionReassignments with no replicas for it: the controller puts the partition back on its original
replicas and drops the ones it was adding, as `kafka-reassign-partitions.sh --cancel` does. The page refreshes
itself every few seconds while something is moving, so a finished reassignment leaves the list.
"""
from __future__ import annotations

from flask import Blueprint, request

from kbroker.protocol.client import KafkaError, error_name

from .web import client, done, page

blueprint = Blueprint("reassignments", __name__)


@blueprint.get("/reassignments")
def index():
    moving = client().list_reassignments()
    rows = [(t, p, replicas, adding, removing) for (t, p), (replicas, adding, removing) in sorted(moving.items())]
    return page("reassignments.html", rows=rows)


@blueprint.post("/reassignments/cancel")
def cancel():
    topic = (request.form.get("topic") or "").strip()
    try:
        partition = int(request.form.get("partition", ""))
    except ValueError:
        partition = -1
    if not topic or partition < 0:
        return done("Give the topic and partition whose reassignment to cancel.", "reassignments.index", "error")
    try:
        results = client().alter_reassignments({(topic, partition): None})
    except KafkaError as e:
        return done(f"Not cancelled: {e}", "reassignments.index", "error")
    code, message = results.get((topic, partition), (0, None))
    if code:
        return done(f"Not cancelled: {message or 'refused'} ({error_name(code)})", "reassignments.index", "error")
    return done(f"Cancelled the reassignment of {topic}-{partition}: it goes back to its original replicas.",
                "reassignments.index")
