"""Java key stores made as a Kafka operator makes them, with the JDK's keytool (Kafka's documented TLS set-up):
a CA, then per name a key pair in a JKS key store, a certificate request signed by the CA, the CA imported as
CARoot and the signed reply over the key; the same key store converted to PKCS12; trust stores holding the CA
in JKS and PKCS12. Tests read what a real deployment brings, not what our own code wrote."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

STORE_PASSWORD = "store-secret"
KEY_PASSWORD = "key-secret"     # the JKS key stores' key password (ssl.key.password); PKCS12 ones use the store's
_FAST_JVM = ["-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-Xshare:auto"]


def keytool(*args: str) -> None:
    subprocess.run(["keytool", *_FAST_JVM, *args], check=True, capture_output=True, timeout=60)


@dataclass
class Pki:
    directory: str
    ca_pem: str = ""                                        # the CA certificate, exported by keytool -rfc
    truststore_jks: str = ""
    truststore_p12: str = ""
    keystore_jks: dict[str, str] = field(default_factory=dict)   # name -> JKS key store
    keystore_p12: dict[str, str] = field(default_factory=dict)   # name -> PKCS12 key store

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)


def make_ca(pki: Pki, name: str = "ca") -> str:
    """A self-signed CA in <name>.p12; returns its certificate exported as PEM (<name>.pem)."""
    store, pem = pki.path(f"{name}.p12"), pki.path(f"{name}.pem")
    keytool("-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname", "secp256r1", "-dname",
            f"CN=keytool {name},O=kbroker", "-ext", "bc:c", "-validity", "3650", "-keystore", store,
            "-storetype", "PKCS12", "-storepass", STORE_PASSWORD)
    keytool("-exportcert", "-rfc", "-alias", name, "-keystore", store, "-storepass", STORE_PASSWORD, "-file", pem)
    return pem


def trust_store(pki: Pki, ca_pem: str, store: str, store_type: str) -> str:
    keytool("-importcert", "-noprompt", "-alias", "CARoot", "-file", ca_pem, "-keystore", pki.path(store),
            "-storetype", store_type, "-storepass", STORE_PASSWORD)
    return pki.path(store)


def signed_key_store(pki: Pki, name: str, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
                     ca: str = "ca") -> None:
    """<name>.jks (key password KEY_PASSWORD) and <name>.p12 holding a key signed by the CA, with the CA above
    it in its chain; the certificate's subject is CN=<name>,O=kbroker, its alternative names `hosts`."""
    jks, p12, csr, crt = (pki.path(f"{name}{ext}") for ext in (".jks", ".p12", ".csr", ".crt"))
    store = ["-keystore", jks, "-storepass", STORE_PASSWORD, "-keypass", KEY_PASSWORD]
    keytool("-genkeypair", "-alias", name, "-keyalg", "RSA", "-keysize", "2048", "-dname", f"CN={name},O=kbroker",
            "-validity", "3650", "-storetype", "JKS", *store)
    keytool("-certreq", "-alias", name, "-file", csr, *store)
    san = ",".join(f"ip:{h}" if h[0].isdigit() else f"dns:{h}" for h in hosts)
    keytool("-gencert", "-rfc", "-alias", ca, "-keystore", pki.path(f"{ca}.p12"), "-storepass", STORE_PASSWORD,
            "-infile", csr, "-outfile", crt, "-validity", "3650", "-ext", "EKU=serverAuth,clientAuth",
            *(["-ext", f"SAN={san}"] if san else []))
    keytool("-importcert", "-noprompt", "-alias", "CARoot", "-file", pki.path(f"{ca}.pem"), *store)
    keytool("-importcert", "-alias", name, "-file", crt, *store)
    keytool("-importkeystore", "-srckeystore", jks, "-srcstorepass", STORE_PASSWORD, "-srckeypass", KEY_PASSWORD,
            "-srcalias", name, "-destkeystore", p12, "-deststoretype", "PKCS12", "-deststorepass", STORE_PASSWORD,
            "-destkeypass", STORE_PASSWORD)
    pki.keystore_jks[name], pki.keystore_p12[name] = jks, p12


def make_pki(directory: str, names: tuple[str, ...] = ("broker", "client")) -> Pki:
    """A CA, its trust stores (JKS and PKCS12) and a signed key store per name (JKS and PKCS12)."""
    pki = Pki(str(directory))
    pki.ca_pem = make_ca(pki)
    pki.truststore_jks = trust_store(pki, pki.ca_pem, "truststore.jks", "JKS")
    pki.truststore_p12 = trust_store(pki, pki.ca_pem, "truststore.p12", "PKCS12")
    for name in names:
        signed_key_store(pki, name)
    return pki
