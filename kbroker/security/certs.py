"""A private certificate authority and the certificates it signs, as PEM text (the `cryptography` package).

For the dev cluster and compose (`kbroker cluster up --security ...`) and the tests: a CA, then one certificate
per broker (server and client use, subject alternative names for its host names and addresses) and per client
principal. Keys are EC P-256: fast to make, accepted by OpenSSL, librdkafka and Python's ssl alike.
"""
from __future__ import annotations

import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 3650


def _name(common_name: str, organization: str | None) -> x509.Name:
    parts = ([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)] if organization else []) + \
            [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    return x509.Name(parts)


def _pem(cert: x509.Certificate, key) -> tuple[str, str]:
    return (cert.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))


def make_ca(common_name: str = "kbroker dev CA") -> tuple[str, str]:
    """(certificate PEM, private key PEM) of a self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name, "kbroker")
    cert = (_builder(name, name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return _pem(cert, key)


def make_cert(ca_cert_pem: str, ca_key_pem: str, common_name: str, hosts: list[str] = (),
              organization: str | None = "kbroker") -> tuple[str, str]:
    """(certificate PEM, private key PEM) signed by the CA, for TLS servers and clients alike. hosts: DNS names
    and IP addresses for the subject alternative names (what clients check the broker's address against). The
    subject is "CN=<common_name>,O=<organization>" as RFC 2253 prints it (the principal of a TLS client)."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    names = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    builder = (_builder(_name(common_name, organization), ca_cert.subject, key.public_key())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return _pem(builder.sign(ca_key, hashes.SHA256()), key)
