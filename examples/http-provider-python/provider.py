#!/usr/bin/env python3
"""An example cirrus provider in Python's standard library, serving protocol v1 of the http provider.

Its "cloud" is an inventory file (inventory.json): machines, a pool of load balancer addresses and
a route table, kept in memory. It implements instancesV2, loadBalancer and routes; see README.md,
and docs/http-provider-v1.openapi.yaml in cirrus for the protocol.

    python3 provider.py --inventory inventory.json --port 8080 [--token-file token]
                        [--tls-cert server.crt --tls-key server.key [--client-ca ca.crt]]
"""

import argparse
import copy
import hmac
import ipaddress
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROTOCOL = "v1"


class ProtocolError(Exception):
    """An error answer of protocol v1: a code the protocol defines, an HTTP status and a message."""

    def __init__(self, code, status, message, retry_after_seconds=None):
        super().__init__(message)
        self.code = code
        self.status = status
        self.retry_after_seconds = retry_after_seconds


def not_found(what):
    return ProtocolError("InstanceNotFound", 404, f"no instance {what}")


class Cloud:
    """The cloud's state. One lock: requests arrive on many threads at once."""

    def __init__(self, inventory):
        self.name = inventory["providerName"]
        self.instances = inventory["instances"]
        self.pool = list(ipaddress.ip_network(inventory["loadBalancerPool"]).hosts())
        self.load_balancers = {}  # loadBalancerName -> {"ip", "nodes", "service"}
        self.routes = [dict(r, enableNodeAddresses=False, targetNodeAddresses=[]) for r in inventory.get("routes", [])]
        self.lock = threading.Lock()

    # -- instances ---------------------------------------------------------------------------
    def provider_id(self, instance):
        return f"{self.name}://{instance['id']}"

    def find(self, node):
        """The instance behind a Node: by spec.providerID first, then by the Node's name."""
        provider_id = (node.get("spec") or {}).get("providerID")
        name = (node.get("metadata") or {}).get("name")
        for instance in self.instances:
            if provider_id and self.provider_id(instance) == provider_id:
                return instance
        for instance in self.instances:
            if instance["name"] == name:
                return instance
        return None

    def require(self, node):
        instance = self.find(node)
        if instance is None:
            name = (node.get("metadata") or {}).get("name")
            raise not_found(f"for Node {name!r}")
        return instance

    def instance_exists(self, body):
        return self.find(body["node"]) is not None

    def instance_shutdown(self, body):
        return self.require(body["node"]).get("state") == "shutdown"

    def instance_metadata(self, body):
        instance = self.require(body["node"])
        return {
            "providerId": self.provider_id(instance),
            "instanceType": instance.get("instanceType", ""),
            "nodeAddresses": instance.get("addresses", []),
            "zone": instance.get("zone", ""),
            "region": instance.get("region", ""),
            "additionalLabels": instance.get("labels", {}),
        }

    # -- load balancers ----------------------------------------------------------------------
    @staticmethod
    def status(lb):
        return {"ingress": [{"ip": lb["ip"], "ipMode": "VIP"}]}

    def get_load_balancer(self, body):
        with self.lock:
            lb = self.load_balancers.get(body["loadBalancerName"])
            return None if lb is None else self.status(lb)

    def ensure_load_balancer(self, body):
        """Idempotent: a Service keeps its address; only its node set follows the call."""
        nodes = sorted((n.get("metadata") or {}).get("name", "") for n in body["nodes"])
        with self.lock:
            lb = self.load_balancers.get(body["loadBalancerName"])
            if lb is None:
                taken = {lb["ip"] for lb in self.load_balancers.values()}
                free = next((str(ip) for ip in self.pool if str(ip) not in taken), None)
                if free is None:
                    raise ProtocolError("Retry", 503, "the address pool is exhausted", retry_after_seconds=30)
                lb = {"ip": free, "service": body["service"]["metadata"].get("name")}
                self.load_balancers[body["loadBalancerName"]] = lb
            lb["nodes"] = nodes
            return self.status(lb)

    def update_load_balancer(self, body):
        with self.lock:
            lb = self.load_balancers.get(body["loadBalancerName"])
            if lb is not None:
                lb["nodes"] = sorted((n.get("metadata") or {}).get("name", "") for n in body["nodes"])
        return None

    def ensure_load_balancer_deleted(self, body):
        with self.lock:
            self.load_balancers.pop(body["loadBalancerName"], None)  # absent is fine: already deleted
        return None

    # -- routes ------------------------------------------------------------------------------
    def list_routes(self, body):
        names = {i["name"] for i in self.instances}
        with self.lock:
            routes = copy.deepcopy(self.routes)
        for route in routes:
            route["blackhole"] = route["targetNode"] not in names  # its target is gone
        return routes

    def create_route(self, body):
        route = body["route"]
        with self.lock:
            if not any(r["destinationCidr"] == route["destinationCidr"] for r in self.routes):
                self.routes.append(
                    {
                        "name": f"{body['clusterName']}-{body['nameHint']}",
                        "targetNode": route["targetNode"],
                        "destinationCidr": route["destinationCidr"],
                        "enableNodeAddresses": False,
                        "targetNodeAddresses": [],
                    }
                )
        return None

    def delete_route(self, body):
        route = body["route"]
        with self.lock:
            self.routes = [
                r
                for r in self.routes
                if not (r["name"] == route["name"] and r["destinationCidr"] == route["destinationCidr"])
            ]
        return None


CALLS = {
    "instanceExists": Cloud.instance_exists,
    "instanceShutdown": Cloud.instance_shutdown,
    "instanceMetadata": Cloud.instance_metadata,
    "getLoadBalancer": Cloud.get_load_balancer,
    "ensureLoadBalancer": Cloud.ensure_load_balancer,
    "updateLoadBalancer": Cloud.update_load_balancer,
    "ensureLoadBalancerDeleted": Cloud.ensure_load_balancer_deleted,
    "listRoutes": Cloud.list_routes,
    "createRoute": Cloud.create_route,
    "deleteRoute": Cloud.delete_route,
}


def handler_for(cloud, token):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: cirrus reuses connections
        disable_nagle_algorithm = True  # headers and body go out as two writes; do not delay the second

        def log_message(self, format, *args):  # quiet; errors still reach stderr
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def fail(self, error):
            body = {"code": error.code, "message": str(error)}
            if error.retry_after_seconds is not None:
                body["retryAfterSeconds"] = error.retry_after_seconds
            self.answer(error.status, {"error": body})

        def authorized(self):
            if token is None:
                return True
            given = self.headers.get("Authorization", "")
            return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

        def do_GET(self):
            if not self.authorized():
                return self.fail(ProtocolError("Failed", 401, "a valid bearer token is required"))
            if self.path.rstrip("/") != f"/{PROTOCOL}/capabilities":
                return self.fail(ProtocolError("NotImplemented", 404, f"no such path {self.path}"))
            self.answer(
                200,
                {
                    "protocol": PROTOCOL,
                    "providerName": cloud.name,
                    "hasClusterId": True,
                    "capabilities": ["instancesV2", "loadBalancer", "routes"],
                },
            )

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.authorized():
                return self.fail(ProtocolError("Failed", 401, "a valid bearer token is required"))
            prefix = f"/{PROTOCOL}/"
            call = CALLS.get(self.path[len(prefix):]) if self.path.startswith(prefix) else None
            if call is None:
                return self.fail(ProtocolError("NotImplemented", 501, f"this provider does not implement {self.path}"))
            try:
                body = json.loads(raw or b"{}")
                self.answer(200, {"result": call(cloud, body)})
            except ProtocolError as error:
                self.fail(error)
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                self.fail(ProtocolError("Failed", 400, f"bad request to {self.path}: {error!r}"))

    return Handler


def main():
    parser = argparse.ArgumentParser(description="An example cirrus provider (protocol v1).")
    parser.add_argument("--inventory", required=True, help="the cloud: machines, address pool, routes (JSON)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--token-file", help="require this bearer token")
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM) ...")
    parser.add_argument("--tls-key", help="... and its key")
    parser.add_argument("--client-ca", help="require client certificates signed by this CA (PEM)")
    args = parser.parse_args()

    with open(args.inventory, encoding="utf-8") as f:
        cloud = Cloud(json.load(f))
    token = None
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    server = ThreadingHTTPServer((args.host, args.port), handler_for(cloud, token))
    scheme = "http"
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        if args.client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(args.client_ca)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    host, port = server.server_address[:2]
    print(f"listening on {scheme}://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
