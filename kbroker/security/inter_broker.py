"""The ClientSecurity of a broker's own connections to other brokers (controller channel, replica fetchers,
transaction marker sender, controlled shutdown), built from its config as Kafka's inter-broker client does.

Its protocol is the inter-broker listener's; the SASL mechanism is sasl.mechanism.inter.broker.protocol and the
credentials the username/password options of that listener's JAAS line for the mechanism
(listener.name.<l>.<mech>.sasl.jaas.config, else sasl.jaas.config); TLS trusts the listener's truststore and
presents its keystore (for ssl.client.auth), checking host names per ssl.endpoint.identification.algorithm.
The principal it logs in as needs ClusterAction on the cluster once ACLs are on (super.users grants it).
"""
from __future__ import annotations

from ..config import ConfigError
from ..protocol.client.security import ClientSecurity
from ..protocol.errors import KafkaError

_TLS_KEYS = ("ssl.truststore.certificates", "ssl.truststore.location", "ssl.keystore.key",
             "ssl.keystore.certificate.chain", "ssl.keystore.location", "ssl.key.password")


def inter_broker_security(config) -> ClientSecurity | None:
    """None on a PLAINTEXT inter-broker listener; ConfigError when the settings do not make a client."""
    name = config.inter_broker_listener
    protocol = next(l.security_protocol for l in config.advertised_listeners if l.name == name)
    if protocol == "PLAINTEXT":
        return None
    props = {"security.protocol": protocol,
             "ssl.endpoint.identification.algorithm":
                 config.listener_value(name, "ssl.endpoint.identification.algorithm") or ""}
    if protocol.startswith("SASL_"):
        mechanism = config["sasl.mechanism.inter.broker.protocol"]
        props.update({"sasl.mechanism": mechanism,
                      "sasl.jaas.config": config.listener_value(name, "sasl.jaas.config", mechanism) or ""})
    if protocol.endswith("SSL"):
        props.update({key: config.listener_value(name, key) for key in _TLS_KEYS
                      if config.listener_value(name, key)})
        props.update({"ssl.truststore.type": "PEM", "ssl.keystore.type": "PEM"})
    try:
        return ClientSecurity.from_properties(props)
    except KafkaError as e:
        raise ConfigError(f"the inter-broker listener {name} ({protocol}): {e}") from None
