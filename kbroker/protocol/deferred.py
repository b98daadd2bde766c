"""A response that comes later: a handler that must wait (a Produce for its acks=all replication) returns a
DeferredAnswer, and the connection (network.server) reads on and sends the answers in request order once they
are complete. Plain callbacks, no gevent: whoever completes the answer (a greenlet of the purgatory's) runs what
was chained to it, the send included."""
from __future__ import annotations

import logging

log = logging.getLogger("kbroker.network")


class DeferredAnswer:
    """A response its handler completes later, from another greenlet (a Produce waiting for acks=all): `complete`
    hands over the response (whatever the handler would have returned), `fail` closes the connection. `then`
    chains a function to apply to it when it comes (dispatch turns it into a frame)."""
    __slots__ = ("ready", "value", "failed", "_callback")

    def __init__(self):
        self.ready = self.failed = False
        self.value = None
        self._callback = None

    def complete(self, value) -> None:
        self.ready, self.value = True, value
        if self._callback is not None:
            self._callback(self)

    def fail(self) -> None:
        self.failed = True
        self.complete(None)

    def on_ready(self, callback) -> None:
        """callback(self) once complete (at once if it is)."""
        self._callback = callback
        if self.ready:
            callback(self)

    def then(self, fn) -> "DeferredAnswer":
        """The deferred result of fn(value); a raising fn fails it (logged)."""
        out = DeferredAnswer()

        def chained(answer):
            if answer.failed:
                out.fail()
                return
            try:
                value = fn(answer.value)
            except Exception:
                log.exception("completing a deferred answer failed")
                out.fail()
                return
            out.complete(value)
        self.on_ready(chained)
        return out
