"""moto's server with behaviours of AWS that moto 5.2.5 lacks, which
kubernetes/cloud-provider-aws relies on (the migration test in test/migration/ runs it against this
emulator). tools/aws-emulator/server.ts starts this file in place of `python -m moto.server`; it
takes the same arguments.

1. A Classic ELB created without a health check has AWS's default one (TCP on the first
   listener's instance port, interval 30 s, timeout 5 s, unhealthy 2, healthy 10). moto leaves it
   empty, and cloud-provider-aws reads it unguarded (ensureLoadBalancerHealthCheck): it panics.
2. A network load balancer's DNS name has AWS's NLB form, <name>-<id>.elb.<region>.amazonaws.com.
   moto gives every ELBv2 load balancer the ALB and Classic form, <name>-1.<region>.elb.amazonaws.com,
   and cloud-provider-aws tells a Classic ELB from an NLB by that suffix (validateServiceAnnotations):
   it refuses to update every NLB it made. Its attributes include access_logs.s3.enabled=false, as
   AWS reports them; moto leaves the key out until someone sets it, so cloud-provider-aws setting
   it to the default looked like a change.
3. ModifyListener takes the NLB protocols TLS, UDP and TCP_UDP (moto takes HTTP, HTTPS and TCP
   only), with a TLS listener's certificates. cloud-provider-aws modifies a TLS listener whenever
   its SSL policy is not the annotation's (AWS, and moto, give one by default): on moto it failed,
   and the load balancer's node set was never updated again.
4. A Classic ELB's additional attributes hold one entry per key. moto appends a second
   elb.http.desyncmitigationmode entry on every ModifyLoadBalancerAttributes without additional
   attributes, so a load balancer looked changed by each update that changed nothing.
5. A new Classic ELB's attributes are AWS's defaults: connection draining off with its 300 s
   timeout, and elb.http.desyncmitigationmode=defensive among the additional attributes. moto
   leaves both out until the first ModifyLoadBalancerAttributes, so a load balancer made without
   one (cirrus changes no attribute that is already as wanted) looked different from one that
   cloud-provider-aws made and modified, and cloud-provider-aws modified it on taking it over.
6. A network load balancer's subnet mappings keep their Elastic IP (AllocationId, which must exist)
   and private IPv4 address, and DescribeLoadBalancers reports them in each zone's
   LoadBalancerAddresses, as AWS does. moto takes the subnet and drops the rest, so an NLB made
   with the eip-allocations or private-ipv4-addresses annotation could not be told from one without.
7. A target group of an NLB protocol (TCP, UDP, TCP_UDP, TLS) reports AWS's
   preserve_client_ip.enabled (true for instance targets) and proxy_protocol_v2.enabled (false)
   among its attributes. moto leaves both out until someone sets them, so the target group
   attributes annotation asking for the default looked like a change on every ensure.
"""

import sys

from moto.elb import models as elb_models
from moto.elbv2 import models as elbv2_models
from moto.elbv2.exceptions import ELBClientError
from moto.server import main

AWS_DEFAULT_HEALTH_CHECK = {"timeout": "5", "healthy_threshold": "10", "unhealthy_threshold": "2", "interval": "30"}


def _with_default_health_check(init):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.health_check is None and self.listeners:
            target = f"TCP:{self.listeners[0].instance_port}"
            self.health_check = elb_models.FakeHealthCheck(target=target, **AWS_DEFAULT_HEALTH_CHECK)

    return patched


def _with_nlb_dns_name(create):
    def patched(self, *args, **kwargs):
        balancer = create(self, *args, **kwargs)
        if balancer.type == "network":
            balancer_id = balancer.arn.rsplit("/", 1)[-1]
            balancer.dns_name = f"{balancer.name}-{balancer_id}.elb.{self.region_name}.amazonaws.com"
            balancer.attrs.setdefault("access_logs.s3.enabled", "false")
        return balancer

    return patched


NLB_PROTOCOLS = ("TLS", "UDP", "TCP_UDP")


def _with_nlb_protocols(modify):
    def patched(self, arn, port=None, protocol=None, ssl_policy=None, certificates=None, actions=None):
        if protocol not in NLB_PROTOCOLS:
            return modify(self, arn, port, protocol, ssl_policy, certificates, actions)
        for certificate in certificates or []:
            if not self._certificate_exists(certificate_arn=certificate["CertificateArn"]):
                raise ELBClientError("CertificateNotFound", f"Certificate {certificate['CertificateArn']} not found")
        listener = modify(self, arn, port, None, ssl_policy, None, actions)
        listener.protocol = protocol
        if certificates:
            listener.certificate = certificates[0]["CertificateArn"]
            listener.certificates = [c["CertificateArn"] for c in certificates]
        return listener

    return patched


def _with_one_entry_per_key(modify):
    def patched(self, load_balancer_name, *args, **kwargs):
        modify(self, load_balancer_name, *args, **kwargs)
        attributes = self.get_load_balancer(load_balancer_name).attributes
        attributes["additional_attributes"] = list(dict(attributes["additional_attributes"]).items())

    return patched


def _with_aws_default_attributes(defaults):
    def patched(cls):
        attributes = defaults.__func__(cls)
        attributes["connection_draining"] = {"enabled": False, "timeout": 300}
        attributes["additional_attributes"] = [("elb.http.desyncmitigationmode", "defensive")]
        return attributes

    return classmethod(patched)


def _subnet_address(ec2_backend, mapping):
    address = {}
    if mapping.get("AllocationId"):
        eip = ec2_backend.address_by_allocation([mapping["AllocationId"]])[0]
        address.update(IpAddress=eip.public_ip, AllocationId=eip.allocation_id)
    if mapping.get("PrivateIPv4Address"):
        address["PrivateIPv4Address"] = mapping["PrivateIPv4Address"]
    return address


def _with_subnet_addresses(create):
    def patched(self, *args, **kwargs):
        # Looked up before the load balancer is made: an unknown allocation makes nothing.
        addresses = {m["SubnetId"]: _subnet_address(self.ec2_backend, m) for m in kwargs.get("subnet_mappings") or []}
        balancer = create(self, *args, **kwargs)
        balancer.subnet_addresses = {subnet: a for subnet, a in addresses.items() if a}
        return balancer

    return patched


def _zones_with_addresses(self):
    zones = [elbv2_models.AvailabilityZone(subnet) for subnet in self.subnets]
    for zone in zones:
        address = getattr(self, "subnet_addresses", {}).get(zone.subnet_id)
        if address:
            zone.load_balancer_addresses = [address]
    return zones


NLB_TARGET_PROTOCOLS = ("TCP", "UDP", "TCP_UDP", "TLS")


def _with_nlb_target_group_attributes(init):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.protocol in NLB_TARGET_PROTOCOLS:
            self.attributes.setdefault("preserve_client_ip.enabled", "true" if self.target_type == "instance" else "false")
            self.attributes.setdefault("proxy_protocol_v2.enabled", "false")

    return patched


elb_models.LoadBalancer.get_default_attributes = _with_aws_default_attributes(
    elb_models.LoadBalancer.get_default_attributes
)
elb_models.LoadBalancer.__init__ = _with_default_health_check(elb_models.LoadBalancer.__init__)
elbv2_models.ELBv2Backend.create_load_balancer = _with_nlb_dns_name(elbv2_models.ELBv2Backend.create_load_balancer)
elbv2_models.ELBv2Backend.create_load_balancer = _with_subnet_addresses(elbv2_models.ELBv2Backend.create_load_balancer)
elbv2_models.FakeLoadBalancer.availability_zones = property(_zones_with_addresses)
elbv2_models.FakeTargetGroup.__init__ = _with_nlb_target_group_attributes(elbv2_models.FakeTargetGroup.__init__)
elbv2_models.ELBv2Backend.modify_listener = _with_nlb_protocols(elbv2_models.ELBv2Backend.modify_listener)
elb_models.ELBBackend.modify_load_balancer_attributes = _with_one_entry_per_key(
    elb_models.ELBBackend.modify_load_balancer_attributes
)

if __name__ == "__main__":
    main(sys.argv[1:])
