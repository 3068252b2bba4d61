"""Behind a TLS-intercepting proxy (docs/docker.md, "Proxies and CA certificates"): the bridge's own
downloads trust what ``SSL_CERT_FILE`` names, a bundle of several CAs included, and an install that
meets a certificate it does not trust fails saying which variables give each installer the CA. Two
local https servers with certificates of their own stand for the registry and for a proxy whose CA
the bridge was not given."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from app.errors import CA_HINT, InstallFailed
from tests.e2e.test_acp_registry import _tar
from tests.e2e.test_registry_installs import META, Registry, install, launcher, serve, stderr_of
from tests.support import start_bridge, wait_until


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl), and its key."""
    folder.mkdir()
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def context(pair: tuple[Path, Path]) -> ssl.SSLContext:
    made = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    made.load_cert_chain(*pair)
    return made


def test_an_untrusted_certificate_is_named_with_the_variables_that_trust_it(tmp_path: Path) -> None:
    certificate, other_certificate = self_signed(tmp_path / "registry"), self_signed(tmp_path / "proxy")
    catalog, proxy = Registry(), Registry()
    with serve(catalog, context(certificate)), serve(proxy, context(other_certificate)):
        proxy.files["/probe.tar.gz"] = _tar({"run": (launcher(tmp_path / "started.txt"), 0o755)})
        catalog.binary("behind", "/probe.tar.gz")
        catalog.agents["behind"]["distribution"]["binary"] = {
            key: {**target, "archive": proxy.url + "/probe.tar.gz"}
            for key, target in catalog.agents["behind"]["distribution"]["binary"].items()
        }
        bundle = tmp_path / "bundle.pem"
        for name, trusted in (("one", [certificate[0]]), ("both", [certificate[0], other_certificate[0]])):
            bundle.write_bytes(b"".join(path.read_bytes() for path in trusted))
            (tmp_path / name).mkdir()
            env = {"SSL_CERT_FILE": str(bundle), "ACP_BRIDGE_ACP_REGISTRY_URL": catalog.url + "/registry.json"}
            server = start_bridge(tmp_path / name, env=env)
            try:
                client = server.client()
                assert wait_until(lambda: client.get("/v1/agents").json()["_meta"][META]["source"] != "snapshot", 10)  # noqa: B023
                response = install(client, "behind")
                if name == "one":  # the archive's server is not trusted: said, with the fix
                    assert response.status_code == 500, response.text
                    stderr = stderr_of(response)
                    assert "CERTIFICATE_VERIFY_FAILED" in stderr and stderr.endswith(CA_HINT), stderr
                    assert "NODE_EXTRA_CA_CERTS" in stderr and "SSL_CERT_FILE" in stderr
                else:  # a bundle of both CAs trusts both
                    assert response.status_code == 204, response.text
            finally:
                server.stop()


@pytest.mark.parametrize(
    "stderr",
    [
        "npm error code SELF_SIGNED_CERT_IN_CHAIN\nnpm error errno SELF_SIGNED_CERT_IN_CHAIN",
        "npm error code UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
        "ERROR: Could not install packages due to an OSError: HTTPSConnectionPool(host='pypi.org', port=443): "
        "Max retries exceeded (Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] "
        "certificate verify failed: self-signed certificate in certificate chain')))",
    ],
)
def test_npm_and_pip_certificate_failures_get_the_hint(stderr: str) -> None:
    error = InstallFailed("claude", stderr)
    assert error.details == {"stderr": stderr + "\n" + CA_HINT}


def test_other_failures_get_no_hint() -> None:
    assert InstallFailed("claude", "npm error code E404").details == {"stderr": "npm error code E404"}
