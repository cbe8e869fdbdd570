"""OAuth 2.1 for MCP servers over streamable HTTP (``auth = "oauth"``), against a real SDK
authorization and resource server (``oauth_server.py``): the first connection registers
and authorizes (the test follows the authorization URL, which redirects to the client's
loopback callback), later ones reuse the stored token, an expired token is refreshed, an
invalid one authorized again, and with no terminal and no token the server fails saying
how to authorize it."""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from mcp_helpers import free_port, run_agent, settings_with, start_http_server, stop_process

from mainspring import Agent, PluginLoadError
from mainspring.cli import main
from mainspring.mcp import oauth, report
from mainspring.mcp.oauth_storage import TokenFiles
from mainspring.settings import McpServerSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

OAUTH_SERVER = str(Path(__file__).with_name("oauth_server.py"))


@pytest.fixture(scope="module")
def oauth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The server's URL and the file where it logs each grant."""
    log = tmp_path_factory.mktemp("oauth") / "grants.log"
    port = free_port()
    process = start_http_server(port, "--log", str(log), script=OAUTH_SERVER)
    yield f"http://127.0.0.1:{port}/mcp", log
    stop_process(process)


class Browser:
    """The authorization handler of a person who approves: it follows each authorization
    URL (in a thread, as a browser would), which redirects to the client's callback."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, str]] = []
        self._pages: list[httpx.Response] = []
        self._following: list[threading.Thread] = []
        self.forge = False
        self.reading_s = 0.0  # how long the person takes before following the URL

    def __call__(self, server: str, url: str) -> None:
        self.shown.append((server, url))

        def follow() -> None:
            threading.Event().wait(self.reading_s)
            if self.forge:  # someone else's redirect first: a code with another state
                callback = parse_qs(urlsplit(url).query)["redirect_uri"][0]
                self._pages.append(httpx.get(f"{callback}?code=stolen&state=forged"))
            self._pages.append(httpx.get(url, follow_redirects=True, timeout=30))

        thread = threading.Thread(target=follow, daemon=True)
        self._following.append(thread)
        thread.start()

    def pages(self) -> list[httpx.Response]:
        """The pages the browser was shown, once it has read them all."""
        for thread in self._following:
            thread.join()
        return self._pages


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Browser]:
    monkeypatch.setenv("MAINSPRING_DATA_DIR", str(tmp_path / "data"))
    shown = Browser()
    oauth.set_authorization_handler(shown)
    yield shown
    oauth.set_authorization_handler(None)


def grants(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def secure(url: str, **options: object) -> McpServerSettings:
    return McpServerSettings(url=url, auth="oauth", required=True, **options)  # type: ignore[arg-type]


async def echo_once(url: str, **options: object) -> str:
    steps = [faux.tool_call("echo", {"text": "hi"}), faux.text("done")]
    run = await run_agent(steps, settings_with(secure=secure(url, **options)))
    results = [e for e in run.recorder.events if e.type == "tool_execution_end"]
    assert len(results) == 1 and not results[0].is_error
    return str(results[0].result.content[0].text)


def test_first_connection_authorizes_and_later_ones_reuse_the_token(
    oauth_server: tuple[str, Path], browser: Browser, tmp_path: Path
) -> None:
    url, log = oauth_server
    before = len(grants(log))
    assert asyncio.run(echo_once(url)) == "hi"
    assert [server for server, _ in browser.shown] == ["secure"]
    assert browser.pages()[0].status_code == 200 and "authorized" in browser.pages()[0].text
    assert grants(log)[before:] == ["register", "authorize", "token authorization_code"]

    assert asyncio.run(echo_once(url)) == "hi"  # a second agent, a new session
    assert len(browser.shown) == 1 and grants(log)[before + 3 :] == []

    directory = tmp_path / "data" / "mcp-oauth"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(path.name.split(".", 1)[1] for path in directory.iterdir())
    assert files == ["client.json", "tokens.json"]
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(path.read_text())["url"] == url


def test_a_redirect_without_the_state_of_the_request_is_refused(
    oauth_server: tuple[str, Path], browser: Browser
) -> None:
    url, _ = oauth_server
    browser.forge = True
    assert asyncio.run(echo_once(url)) == "hi"
    forged, real = browser.pages()
    assert forged.status_code == 404 and real.status_code == 200


@pytest.mark.skipif(
    os.environ.get("MAINSPRING_SLOW_TESTS") != "1",
    reason="waits out a startup deadline; runs with MAINSPRING_SLOW_TESTS=1",
)
def test_the_person_s_time_does_not_count_against_the_startup_deadline(
    oauth_server: tuple[str, Path], browser: Browser
) -> None:
    url, _ = oauth_server
    browser.reading_s = 3.0
    assert asyncio.run(echo_once(url, startup_timeout_s=2.0, oauth_client_name="slow")) == "hi"
    assert len(browser.shown) == 1


def test_an_expired_token_is_refreshed_without_asking(
    oauth_server: tuple[str, Path], browser: Browser
) -> None:
    url, log = oauth_server
    assert asyncio.run(echo_once(url)) == "hi"
    storage = TokenFiles(url)
    record = json.loads(storage.tokens_path.read_text())
    record["expires_at"] = 1.0  # it expired long ago
    storage.tokens_path.write_text(json.dumps(record))
    before = len(grants(log))

    assert asyncio.run(echo_once(url)) == "hi"
    assert grants(log)[before:] == ["token refresh_token"]
    assert len(browser.shown) == 1
    renewed = json.loads(storage.tokens_path.read_text())
    assert renewed["value"]["access_token"] != record["value"]["access_token"]
    assert renewed["expires_at"] > 0


def test_a_token_the_server_refuses_is_authorized_again(
    oauth_server: tuple[str, Path], browser: Browser
) -> None:
    url, log = oauth_server
    assert asyncio.run(echo_once(url)) == "hi"
    storage = TokenFiles(url)
    record = json.loads(storage.tokens_path.read_text())
    record["value"]["access_token"] = "revoked"
    storage.tokens_path.write_text(json.dumps(record))
    before = len(grants(log))

    assert asyncio.run(echo_once(url)) == "hi"
    assert grants(log)[before:] == ["authorize", "token authorization_code"]  # no new client
    assert len(browser.shown) == 2


def test_a_token_refused_during_a_session_is_authorized_again_for_the_next_call(
    oauth_server: tuple[str, Path], browser: Browser
) -> None:
    url, _ = oauth_server
    steps = [
        faux.tool_call("forget_tokens", {}),
        faux.tool_call("echo", {"text": "again"}),
        faux.text("done"),
    ]
    run = asyncio.run(run_agent(steps, settings_with(secure=secure(url, oauth_client_name="mid"))))
    ends = [e for e in run.recorder.events if e.type == "tool_execution_end"]
    assert [(e.is_error, e.result.content[0].text) for e in ends] == [
        (False, "forgotten"),
        (False, "again"),
    ]
    assert len(browser.shown) == 2


def test_a_token_refused_during_a_session_with_nobody_to_ask_fails_the_call_saying_so(
    oauth_server: tuple[str, Path], browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = oauth_server
    steps = [
        faux.tool_call("forget_tokens", {}),
        faux.tool_call("echo", {"text": "again"}),
        faux.text("done"),
    ]
    settings = settings_with(secure=secure(url, oauth_client_name="unasked"))
    agent = Agent(
        model="faux:test", provider=FauxProvider(steps), settings=settings, autoload=False
    )
    oauth.set_authorization_handler(None)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal
    recorder = EventRecorder()
    agent.subscribe(recorder)

    async def prompt() -> None:
        async with agent:
            await agent.prompt("go")

    asyncio.run(prompt())
    check_event_grammar(recorder.events)
    ends = [e for e in recorder.events if e.type == "tool_execution_end"]
    assert [e.is_error for e in ends] == [False, True]
    assert "`mainspring mcp login secure`" in ends[1].result.content[0].text


@pytest.mark.parametrize("garbage", ["{not json", '{"url": "x", "value": {}}', "[]"])
def test_a_corrupt_token_file_is_taken_as_absent(
    oauth_server: tuple[str, Path], browser: Browser, garbage: str
) -> None:
    url, _ = oauth_server
    storage = TokenFiles(url)
    storage.directory.mkdir(parents=True, mode=0o700)
    storage.tokens_path.write_text(garbage)
    storage.client_path.write_text(garbage)
    assert asyncio.run(echo_once(url)) == "hi"
    assert len(browser.shown) == 1
    assert json.loads(storage.tokens_path.read_text())["url"] == url


def test_a_registration_for_an_impossible_callback_is_made_again(
    oauth_server: tuple[str, Path], browser: Browser
) -> None:
    url, log = oauth_server
    storage = TokenFiles(url)
    storage.directory.mkdir(parents=True, mode=0o700)
    forged = {"client_id": "x", "redirect_uris": ["http://127.0.0.1:99999/callback"]}
    storage.client_path.write_text(json.dumps({"url": url, "value": forged}))
    before = len(grants(log))
    assert asyncio.run(echo_once(url)) == "hi"
    assert grants(log)[before:] == ["register", "authorize", "token authorization_code"]


def test_without_a_terminal_or_a_token_the_server_says_how_to_authorize_it(
    oauth_server: tuple[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, log = oauth_server
    monkeypatch.setenv("MAINSPRING_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal
    before = len(grants(log))
    with pytest.raises(PluginLoadError) as raised:
        Agent(
            model="faux:test",
            provider=FauxProvider([]),
            settings=settings_with(secure=secure(url, oauth_client_name="unattended")),
            autoload=False,
        )
    assert (
        'MCP server "secure" needs OAuth authorization and stdin is not a terminal to ask '
        "at: run `mainspring mcp login secure` first\n"
    ) in str(raised.value)
    assert "authorize" not in grants(log)[before:]
    assert not [r for r in caplog.records if r.name.startswith("mcp.client.auth")]


def test_without_a_data_directory_there_is_nowhere_to_keep_tokens(
    oauth_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = oauth_server
    for name in ("MAINSPRING_DATA_DIR", "XDG_DATA_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(PluginLoadError) as raised:
        Agent(
            model="faux:test",
            provider=FauxProvider([]),
            settings=settings_with(secure=secure(url, oauth_client_name="homeless")),
            autoload=False,
        )
    assert (
        'MCP server "secure" could not be authorized: there is no data directory to keep its '
        "tokens in (set MAINSPRING_DATA_DIR, XDG_DATA_HOME or HOME)\n"
    ) in str(raised.value)


def test_mcp_login_authorizes_without_a_terminal_to_ask_at(
    oauth_server: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = oauth_server
    config = tmp_path / "config.toml"
    config.write_text(f'[mcp.servers.secure]\nurl = "{url}"\nauth = "oauth"\n')
    env = dict(
        os.environ,
        MAINSPRING_CONFIG=str(config),
        MAINSPRING_DATA_DIR=str(tmp_path / "data"),
        MAINSPRING_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    with subprocess.Popen(
        [sys.executable, "-m", "mainspring", "mcp", "login", "secure"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as login:
        assert login.stdout is not None
        link = ""
        for line in login.stdout:
            if line.startswith("http://"):
                link = line.strip()
                break
        assert link, "login printed no authorization URL"
        page = httpx.get(link, follow_redirects=True, timeout=30)
        rest = login.stdout.read()
        assert login.wait(60) == 0 and page.status_code == 200
    assert 'MCP server "secure" is authorized' in rest
    assert asyncio.run(TokenFiles(url, tmp_path / "data" / "mcp-oauth").get_tokens())


def test_oauth_needs_a_url() -> None:
    with pytest.raises(ValueError, match='auth = "oauth" needs a url'):
        McpServerSettings(command="x", auth="oauth")


def test_report_shows_an_authorized_server(
    oauth_server: tuple[str, Path], browser: Browser
) -> None:
    url, _ = oauth_server
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([]),
        settings=settings_with(secure=secure(url, startup="eager")),
        autoload=False,
    )
    try:
        (row,) = report(agent)
        assert row["tools"] == ["echo", "forget_tokens"] and row["error"] is None
        assert row["auth"] == "oauth" and row["state"] == "running"
    finally:
        asyncio.run(agent.aclose())


def test_mcp_login_of_a_server_that_is_not_configured_is_a_usage_error(
    oauth_server: tuple[str, Path],
    browser: Browser,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, _ = oauth_server
    config = tmp_path / "config.toml"
    config.write_text(f'[mcp.servers.secure]\nurl = "{url}"\nauth = "oauth"\n')
    monkeypatch.setenv("MAINSPRING_CONFIG", str(config))
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # "secure" is not asked for
    assert main(["mcp", "login", "elsewhere"]) == 2
    assert "mainspring: error: no MCP server named 'elsewhere' is configured" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit) as exited:
        main(["mcp", "login"])
    assert exited.value.code == 2
    assert "use: mainspring mcp login NAME" in capsys.readouterr().err
