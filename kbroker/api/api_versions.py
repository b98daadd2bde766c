"""ApiVersions (key 18), v0-v3.

Lists every API this broker implements with the version range Kafka 2.8 serves for it. v3 requests carry
the client's software name and version, which must match Kafka's pattern or the answer is INVALID_REQUEST.
A request of a version above v3 is answered by the dispatcher with a v0 body carrying UNSUPPORTED_VERSION
and the supported ranges (clients then retry with a version they find there).
"""
from __future__ import annotations

import re

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 18
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = ApiVersionsRequest, ApiVersionsResponse

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _ranges():
    from . import API_MODULES  # the registry imports this module
    return [RESPONSE.ApiVersion(api_key=m.API_KEY, min_version=m.MIN_VERSION, max_version=m.MAX_VERSION)
            for m in sorted(API_MODULES, key=lambda m: m.API_KEY)]


def handle(request, ctx: RequestContext):
    error = Errors.NONE
    if ctx.api_version >= 3 and not (_SOFTWARE.match(request.client_software_name or "")
                                     and _SOFTWARE.match(request.client_software_version or "")):
        error = Errors.INVALID_REQUEST
    return RESPONSE(version=ctx.api_version, error_code=error, api_keys=_ranges())


def unsupported_version_response() -> bytes:
    return RESPONSE(version=0, error_code=Errors.UNSUPPORTED_VERSION, api_keys=_ranges()).encode(version=0)
