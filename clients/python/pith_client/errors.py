"""The one exception type of pith_client."""


class PithError(Exception):
    """A request failed.

    status: the HTTP status (0 when the server could not be reached or the connection broke)
    type:   the server's error type (bad_request, unauthorized, not_found, conflict,
            payload_too_large, too_many_requests, unavailable, internal), or "connection"
    message: the server's explanation
    """

    def __init__(self, status, type, message):
        super().__init__(f"{status} {type}: {message}" if status else f"{type}: {message}")
        self.status = status
        self.type = type
        self.message = message
