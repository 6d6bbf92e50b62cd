"""Schemathesis hooks for scripts/api-fuzz.

GET /api/poll?wait=N holds the request open for up to N seconds (at most 60) when the agent
has nothing to do, which is longer than the fuzzer's response-time limit. Valid long waits
are shortened to one second; invalid values (over 60, negative, not a number) are left as
generated, so the hub must still refuse them at once.
"""

import schemathesis

LONGEST_WAIT = 1.0
WAIT_MAX = 60.0


@schemathesis.hook
def map_query(ctx, query):
    if not isinstance(query, dict) or "wait" not in query:
        return query
    try:
        wait = float(query["wait"])
    except (TypeError, ValueError):
        return query
    if LONGEST_WAIT < wait <= WAIT_MAX:
        query["wait"] = LONGEST_WAIT
    return query
