"""What answers at a Ray cluster's address, asked the way `ray.init` will ask it, in a process of its own
(`python -m reports.running.ray_probe HOST:PORT`, run by reports.running.cluster.check_address): one JSON line on standard
output, `{"answer": ..., "detail": ...}`, where the answer is

- `joinable`: the cluster's GCS answered and a raylet of that cluster runs on this machine (a driver joins a
  cluster through a node of its own machine);
- `token`: the GCS refused this process's token (Ray's token authentication: RAY_AUTH_MODE=token, and the
  token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token), or token mode found no token here;
- `not_a_node`: the cluster answered, but none of its live nodes runs on this machine (`nodes`: their
  addresses);
- `no_ray`: the address answered with something other than Ray's GCS.

Where nothing answers at all, the caller's own timeout ends this process. A process of its own because Ray's
C++ client prints its own lines to standard error and, where the GCS is something else, waits 40 s: the
caller discards the one and bounds the other. (Asked this way, `ray.init` itself spends 20 s printing
"InvalidAuthToken" and then says only "Failed to connect", or waits 60 s for a raylet of this machine.)
"""

from __future__ import annotations

import json
import sys

REQUEST_SECONDS = 5  # the GCS's reply to each request here


def probe(address: str) -> dict:
    from ray._private.services import find_node_ids
    from ray._raylet import GcsClient
    from ray.exceptions import AuthenticationError
    try:
        nodes = GcsClient(address=address).get_all_node_info(timeout=REQUEST_SECONDS)
    except AuthenticationError:
        return {"answer": "token", "detail": "the cluster refused this process's token"}
    except RuntimeError as error:  # (token mode without any token here)
        if "token" in str(error).lower():
            return {"answer": "token", "detail": "RAY_AUTH_MODE=token, and no token found here"}
        return {"answer": "no_ray", "detail": f"{type(error).__name__}: {first_line(error)}"}
    except Exception as error:  # (Ray's RpcError, a timeout: something other than a GCS)
        return {"answer": "no_ray", "detail": f"{type(error).__name__}: {first_line(error)}"}
    alive = {node_id.hex(): info.node_manager_address for node_id, info in nodes.items() if info.state == 0}
    if not alive.keys() & set(find_node_ids()):
        return {"answer": "not_a_node", "detail": "no node of the cluster runs on this machine",
                "nodes": sorted(set(alive.values()))}
    return {"answer": "joinable", "detail": f"{len(alive)} live nodes"}


def first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or ["no detail"])[0]


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1])), flush=True)
