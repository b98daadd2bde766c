"""The fetcher's side of incremental fetch sessions (KIP-227), as Kafka 2.8's FetchSessionHandler.

One handler per connection to a broker. The first request is full (session id 0, epoch 0: every partition)
and asks for a session; once the broker gives one, each request is incremental (the session id, epochs 1, 2,
..., wrapping to 1 after 2^31-1) and names only the partitions added or whose fetch parameters changed since
the previous request, plus the partitions to forget. A partition missing from an incremental response is
unchanged. A session error (FETCH_SESSION_ID_NOT_FOUND: start over; any other: close the session and open a
new one), a response naming partitions it should not (a full one not naming exactly the partitions asked, an
incremental one naming a partition outside the session) or a failed request makes the next request full.
"""
from __future__ import annotations

from ..errors import Errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
_MAX_INT = 2 ** 31 - 1


class FetchSessionHandler:
    def __init__(self):
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions: dict = {}   # the session as the broker will hold it: tp -> fetch parameters

    @property
    def is_full(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def build(self, wanted: dict, changed=None) -> tuple[list, list]:
        """(partitions to send, partitions to forget) for a request fetching `wanted` ({tp: parameters}, in
        order; parameters are any comparable value holding what the request carries for the partition). The
        request carries self.session_id and self.epoch. changed: the only partitions whose parameters may differ
        from the previous request's, for a caller that keeps wanted between requests (None: any may)."""
        if self.is_full:
            self.partitions = dict(wanted)
            return list(wanted.items()), []
        if changed is not None:
            session, send, forget = self.partitions, [], []
            for tp in changed:
                params, old = wanted.get(tp), session.get(tp)
                if params is None:
                    if old is not None:
                        forget.append(tp)
                        del session[tp]
                elif params != old:
                    send.append((tp, params))
                    session[tp] = params
            return send, forget
        session, self.partitions = self.partitions, dict(wanted)
        send, kept = [], 0
        for tp, params in wanted.items():
            old = session.get(tp)
            if old is not None:
                kept += 1
            if old != params:
                send.append((tp, params))
        forget = [tp for tp in session if tp not in wanted] if kept < len(session) else []
        return send, forget

    def handle_response(self, error_code: int, session_id: int, response_tps) -> bool:
        """Take the response's session fields and the partitions it named; whether its partition data may be
        used (False after a session error or an inconsistent response; the next request is then full)."""
        if error_code:
            if error_code == Errors.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH
            return False
        if self.is_full:
            named = set(response_tps)
            if len(named) != len(self.partitions) or not all(tp in named for tp in self.partitions):
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return False
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
            return True
        if not all(tp in self.partitions for tp in response_tps):
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:   # the broker closed the session
            self.epoch = INITIAL_EPOCH
        else:
            self.epoch = 1 if self.epoch == _MAX_INT else self.epoch + 1
        self.session_id = session_id
        return True

    def handle_error(self) -> None:
        """The request failed (no response): the next one closes the session and opens a new one."""
        self.epoch = INITIAL_EPOCH
