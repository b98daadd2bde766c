"""Pure parts of SCRAM credential management: Kafka-style salts, the credential text kadmin writes, which
registered endpoint kadmin picks for its security protocol, and --command-config files read into a
ClientSecurity."""
import base64

from admin_cli.context import endpoint_address
from admin_cli.context import command_config_security
from kbroker.protocol.sasl import scram
from zk.znodes import BrokerInfo, EndPoint


def test_random_salt_is_scram_formatters():
    salts = {scram.random_salt() for _ in range(200)}
    assert len(salts) == 200
    for salt in salts:   # BigInteger(130 random bits).toString(36): at most 26 base-36 digits, no leading zero
        assert 1 <= len(salt) <= 26 and set(salt.decode()) <= set("0123456789abcdefghijklmnopqrstuvwxyz")
        assert salt == b"0" or not salt.startswith(b"0")
    assert max(len(s) for s in salts) >= 24


def test_credential_text_round_trips_and_matches_the_salted_form():
    cred = scram.make_credential("SCRAM-SHA-512", "alice-secret", 8192)
    text = cred.to_config()
    assert text.startswith(f"salt={base64.b64encode(cred.salt).decode()},stored_key=") and text.endswith(
        ",iterations=8192")
    assert scram.ScramCredential.from_config(text) == cred
    salted = scram.salted_password("SCRAM-SHA-512", "alice-secret", cred.salt, 8192)
    assert scram.credential_from_salted("SCRAM-SHA-512", cred.salt, salted, 8192) == cred


def test_endpoint_for_the_security_protocol():
    info = BrokerInfo(1, [EndPoint("INTERNAL", "h1", 9091, "SASL_SSL"), EndPoint("CLIENT", "h2", 9092, "PLAINTEXT"),
                          EndPoint("SECURE", "h3", 9093, "SASL_SSL")])
    assert endpoint_address(info) == ("h2", 9092)
    assert endpoint_address(info, "SASL_SSL") == ("h1", 9091)
    assert endpoint_address(info, "SSL") is None


def test_command_config_reads_java_client_properties(tmp_path):
    path = tmp_path / "admin.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                    "    username=\"admin\" password=\"admin-secret\";\n")
    security = command_config_security(str(path))
    assert (security.protocol, security.sasl_mechanism, security.username, security.password) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "admin-secret")
