"""HTTP plumbing shared by every route: routes stay thin, calling these to turn a request into typed values.

``apis`` (each API's error format, chosen by its sub-app), ``middleware`` (the
front door around every request), ``params`` (query parameters), ``body``
(request bodies), ``json`` (strict JSON in and out), ``runner`` (JSON for
requests aiohttp cannot parse).
"""
