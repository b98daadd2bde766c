"""The console on a secured cluster (SASL_PLAINTEXT, SCRAM-SHA-256 logins, Kafka's AclAuthorizer, the admin a
super user), in a real browser: every visitor logs in and the console acts as them. A wrong password is refused
(a message, no session); the admin sees every topic and the ACLs and users; a second SCRAM user (created on the
console's Security page, given an ACL on one topic there) sees that topic only, on the Overview and the Topics
page, and is told "not allowed" where the cluster refuses them; logging out ends the session."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.clients._util import unique
from tests.console.conftest import shot

pytestmark = pytest.mark.xdist_group("console_security")

KADMIN = os.path.join(os.path.dirname(sys.executable), "kadmin")
MECHANISM = "SCRAM-SHA-256"


class Secured:
    def __init__(self, cluster, console, command_config: str, mine: str, theirs: str):
        self.cluster, self.console, self.command_config = cluster, console, command_config
        self.mine, self.theirs = mine, theirs       # the limited users' topic, and one they may not see
        self.url = console.url

    @property
    def admin_password(self) -> str:
        return self.cluster.security.admin_password

    def kadmin(self, *args: str) -> str:
        out = subprocess.run([KADMIN, "--bootstrap-server", self.cluster.bootstrap, "--command-config",
                              self.command_config, *args], capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        return out.stdout


@pytest.fixture(scope="module")
def secured(zookeeper, tmp_path_factory, console_factory):
    from tests.clients.conftest import _start_cluster
    cluster = _start_cluster(zookeeper, tmp_path_factory, 1, security="sasl_plaintext")
    try:
        path = tmp_path_factory.mktemp("console-security") / "admin.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in cluster.security.client_properties(MECHANISM).items()))
        console = console_factory(cluster, "--command-config", str(path))
        s = Secured(cluster, console, str(path), unique("mine"), unique("theirs"))
        for topic in (s.mine, s.theirs):
            s.kadmin("create-topic", topic, "--partitions", "1", "--replication-factor", "1")
        yield s
    finally:
        cluster.stop()


def log_in(page, url: str, username: str, password: str) -> int:
    page.goto(url + "/login")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_navigation() as nav:
        page.click("form button[type=submit]")
    return nav.value.status


def log_out(page) -> None:
    with page.expect_navigation():
        page.locator("header button", has_text="Log out").click()


def topics_tile(page) -> str:
    return page.locator(".tile", has_text="Topics · partitions").locator(".value").inner_text()


def test_the_login_page_refuses_a_wrong_password(secured, page):
    response = page.goto(secured.url + "/security")
    assert page.url.startswith(secured.url + "/login")
    assert response.status == 200 and "This cluster needs a SASL login (SCRAM-SHA-256)" in page.inner_text("main")
    assert page.locator("nav.side").count() == 0
    shot(page, "login")
    assert log_in(page, secured.url, "admin", "not-the-password") == 401
    assert "Login failed for admin: the brokers refused the username or password." in page.inner_text("main")
    assert page.locator("header .who").count() == 0
    page.goto(secured.url + "/")
    assert page.url.startswith(secured.url + "/login")
    # The JSON of a page is refused too, not redirected.
    assert page.evaluate("async () => (await fetch('/overview/throughput.json')).status") == 401
    assert page.script_errors == []


def test_acls_decide_what_each_user_sees(secured, page):
    assert log_in(page, secured.url, "admin", secured.admin_password) == 200
    assert page.title().startswith("Overview")
    assert page.inner_text("header .who") == "User:admin"
    assert topics_tile(page) == "2 · 2"
    # The admin makes a SCRAM user on the Security page and gives it every operation on one topic.
    user = unique("dave")
    page.goto(secured.url + "/security")
    page.locator("#users-card summary").click()
    page.fill("#user-set [name=user]", user)
    page.fill("#user-set [name=password]", "dave-secret")
    page.select_option("#user-set [name=mechanism]", MECHANISM)
    with page.expect_navigation():
        page.click("#user-set button[type=submit]")
    assert page.locator(f"#users tr[data-user='{user}']").count() == 1
    page.fill("#acl-add [name=principal]", f"User:{user}")
    page.select_option("#acl-add [name=operation]", "All")
    page.fill("#acl-add [name=name]", secured.mine)
    with page.expect_navigation():
        page.click("#acl-add button[type=submit]")
    assert page.locator(f"#acls tr[data-principal='User:{user}']").count() == 1
    assert f"User:{user}" in secured.kadmin("acls", "list", "--topic", secured.mine)
    log_out(page)
    assert page.url.startswith(secured.url + "/login")
    page.goto(secured.url + "/security")                      # the session ended: asked to log in again
    assert page.url.startswith(secured.url + "/login")

    assert log_in(page, secured.url, user, "dave-secret") == 200
    assert page.inner_text("header .who") == f"User:{user}"
    assert topics_tile(page) == "1 · 1"
    response = page.goto(secured.url + "/security")
    assert response.status == 200
    for section in ("acls", "users", "quotas"):
        assert "Not allowed" in page.inner_text(f"#{section}-refused")
    refusal = page.inner_text("#users-refused")
    assert refusal.count("CLUSTER_AUTHORIZATION_FAILED") == 1, refusal      # the error named once, not twice
    assert page.locator("#acls tbody tr").count() == 0 and page.locator("#users tbody tr").count() == 0
    shot(page, "security-not-allowed")
    # What the user may not do is refused with the cluster's words, on the page.
    page.locator("#acls-card summary").click()
    page.fill("#acl-add [name=principal]", f"User:{user}")
    page.fill("#acl-add [name=name]", secured.theirs)
    with page.expect_navigation() as nav:
        page.click("#acl-add button[type=submit]")
    assert nav.value.status == 200 and "ACL not added" in page.inner_text("main")
    assert f"User:{user}" not in secured.kadmin("acls", "list", "--topic", secured.theirs)
    # Transactions lists what the user may describe (nothing); reassignments need the cluster's Describe: the
    # error page says so.
    assert page.goto(secured.url + "/transactions").status == 200
    assert "No transactional ids" in page.inner_text("#transactions")
    response = page.goto(secured.url + "/reassignments")
    assert response.status == 403 and "Not allowed" in page.inner_text("h1")
    assert "CLUSTER_AUTHORIZATION_FAILED" in page.inner_text("main")
    log_out(page)
    page.goto(secured.url + "/")
    assert page.url.startswith(secured.url + "/login")
    assert page.script_errors == []


@pytest.fixture(scope="module")
def limited_user(secured) -> tuple[str, str]:
    """A SCRAM user (made with kadmin users) allowed everything on the `mine` topic only."""
    user, password = unique("erin"), "erin-secret"
    secured.kadmin("users", "add", user, "--mechanism", MECHANISM, "--password", password)
    secured.kadmin("acls", "add", "--allow-principal", f"User:{user}", "--topic", secured.mine)
    return user, password


def test_the_topics_page_lists_only_the_topics_a_user_may_describe(secured, limited_user, page):
    assert log_in(page, secured.url, "admin", secured.admin_password) == 200
    page.goto(secured.url + "/topics")
    assert page.locator(f"#topics tr[data-topic='{secured.mine}']").count() == 1
    assert page.locator(f"#topics tr[data-topic='{secured.theirs}']").count() == 1
    log_out(page)
    assert log_in(page, secured.url, *limited_user) == 200
    page.goto(secured.url + "/topics")
    assert page.locator(f"#topics tr[data-topic='{secured.mine}']").count() == 1
    assert page.locator(f"#topics tr[data-topic='{secured.theirs}']").count() == 0
