"""The default redaction patterns against a corpus of real-shaped secrets and of look-alike
non-secrets, generated deterministically (a fixed seed): no secret may get through, and
at most 2% of the non-secrets may be redacted. The figures are printed (``pytest -s``).

Each secret sample is a snippet as a tool would return it (a ``.env`` line, a config file,
a command's output, a key file read from its second line, grep output...) with the
secret values it holds; a sample leaks if any of them is still in the redacted text.
"""

from __future__ import annotations

import base64
import random
import string
from typing import Any

import mainspring_policy_pack
import pytest

from mainspring import Agent, Settings, ToolResult
from mainspring.testing import FauxProvider

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


class Gen:
    """Random values of the shapes secrets and look-alikes take."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def of(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def alnum(self, n: int) -> str:
        return self.of(ALNUM, n)

    def hex(self, n: int) -> str:
        return self.of(HEX, n)

    def upper(self, n: int) -> str:
        return self.of(string.ascii_uppercase + string.digits, n)

    def password(self) -> str:
        return self.alnum(self.rng.randint(8, 14)) + self.of("!@#%^*_+-", 2) + self.alnum(3)

    def word(self) -> str:
        return self.rng.choice(["app", "db", "main", "prod", "dev", "api", "core", "web"])

    def key_lines(self) -> list[str]:
        return [self.of(B64, 64) for _ in range(self.rng.randint(3, 6))]

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


Sample = tuple[str, str, list[str]]  # family, text, the secret values in it


def _secrets(g: Gen) -> list[Sample]:
    out: list[Sample] = []

    def add(family: str, template: str, *values: str) -> None:
        out.append((family, template.format(*values), list(values)))

    for _ in range(6):
        add("openai", "OPENAI_API_KEY={}", "sk-proj-" + g.alnum(48))
        add("anthropic", 'client = Anthropic(api_key="{}")', "sk-ant-api03-" + g.alnum(80))
        add("aws_access_key", "aws_access_key_id = {}", "AKIA" + g.upper(16))
        add("aws_secret_key", "aws_secret_access_key = {}", g.of(B64, 40))
        add("github", "GITHUB_TOKEN={}", "ghp_" + g.alnum(36))
        add("github", "git clone https://x-access-token:{}@github.com/o/r", "ghs_" + g.alnum(36))
        add("github_env_plain", "GITHUB_TOKEN={}", g.alnum(40))
        add("gitlab", "export GITLAB_TOKEN='{}'", "glpat-" + g.alnum(20))
        add("slack", "SLACK_BOT_TOKEN: {}", f"xoxb-{g.of(string.digits, 12)}-{g.alnum(24)}")
        add(
            "slack_webhook",
            "url: https://hooks.slack.com/services/{}",
            f"T{g.upper(8)}/B{g.upper(10)}/{g.alnum(24)}",
        )
        add("stripe", "STRIPE_API_KEY={}", "sk_live_" + g.alnum(24))
        add("stripe_plain", "STRIPE_API_KEY={}", g.alnum(32))
        add("huggingface", "HF_TOKEN=hf_{}", g.alnum(34))
        add("google", '"apiKey": "{}",', "AIza" + g.of(ALNUM + "_-", 35))
        header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        payload = base64.urlsafe_b64encode(f'{{"sub":"{g.alnum(8)}"}}'.encode()).decode()
        add("jwt", "token: {}", f"{header}.{payload.rstrip('=')}.{g.of(ALNUM + '_-', 43)}")
        add("db_password", "DB_PASSWORD={}", g.password())
        add("db_password", "POSTGRES_PASSWORD={}", g.password())
        add("db_password", "MYSQL_ROOT_PASSWORD='{}'", g.password() + " " + g.alnum(4))
        add("db_password", "export REDIS_PASSWORD={}", g.password())
        add("db_password", "SMTP_PASS={}", g.password())
        add("django_secret", "DJANGO_SECRET_KEY={}", "django-insecure-" + g.password())
        add("django_secret", "SECRET_KEY = '{}'", g.password() + g.alnum(20))
        add("url_credentials", "DATABASE_URL=postgres://app:{}@db:5432/app", g.alnum(16))
        add("url_credentials", "redis://:{}@cache.internal:6379/0", g.alnum(20))
        add("url_credentials", "mongodb+srv://admin:{}@cluster0.x.mongodb.net", g.alnum(12))
        basic = base64.b64encode(f"user:{g.password()}".encode()).decode()
        add("authorization_basic", "Authorization: Basic {}", basic)
        add("authorization_basic", "curl -H 'Authorization: Basic {}' https://x", basic)
        add("bearer", '-H "Authorization: Bearer {}"', g.alnum(40))
        add("config_password", "  password: {}", g.password())
        add("config_password", '{{"db": {{"password": "{}"}}}}', g.password())
        add("config_password", "spring.datasource.password={}", g.password())
        add("config_secret", "client_secret: {}", g.alnum(32))
        add("config_secret", 'access_token = "{}"', g.alnum(40))
        add("npm", "//registry.npmjs.org/:_authToken={}", "npm_" + g.alnum(36))
        add("pypi", "password = {}", "pypi-AgEIcHlwaS5vcmc" + g.of(ALNUM + "_-", 60))
        add("sendgrid", "SENDGRID_API_KEY={}", f"SG.{g.alnum(22)}.{g.alnum(43)}")
        add("twilio", "twilio_key {}", "SK" + g.hex(32))
        add("digitalocean", "token: {}", "dop_v1_" + g.hex(64))
        add("docker_auth", '{{"auths": {{"ghcr.io": {{"auth": "{}"}}}}}}', basic)
        add("azure", "AccountName=x;AccountKey={};EndpointSuffix=core", g.of(B64, 86) + "==")
        add("netrc", "machine api.example.com login bot password {}", g.password())
        add("cli_flag", "mysql --user=root --password={} app", g.password())
        add("cli_flag", "curl -u admin:{} https://x", g.password())
        add("xml", "<password>{}</password>", g.password())
        add("telegram", "BOT={}", f"{g.of(string.digits, 10)}:AA{g.of(ALNUM + '_-', 33)}")
        lines = g.key_lines()
        begin, end = "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"
        block = "\n".join([begin, *lines, end])
        out.append(("private_key", f"key:\n{block}\n", lines))
        lines = g.key_lines()
        body = "\n".join([*lines, "Zm9v", "-----END PRIVATE KEY-----"])
        out.append(("private_key_from_line_2", body, lines))
        lines = g.key_lines()
        grep = "\n".join(f"keys/id_rsa:{n}:{line}" for n, line in enumerate(lines, 2))
        out.append(("private_key_grep", grep, lines))
        lines = g.key_lines()
        numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, 2))
        out.append(("private_key_numbered", numbered, lines))
    return out


KEYS = ["password", "db_password", "passwd", "api_key", "token", "secret", "client_secret"]


def _non_secrets(g: Gen) -> list[str]:
    out: list[str] = []
    for _ in range(8):
        name = g.word()
        k = g.rng.choice(KEYS)
        out += [
            f"{k} = None",
            f"def login(username: str, {k}: str) -> bool:",
            f"{k} = getpass.getpass()",
            f'{k} = os.environ["{name.upper()}_{k.upper()}"]',
            f'{k}=os.getenv("{k.upper()}")',
            f"self.{k} = {k}",
            f"user = authenticate(username=username, {k}={k})",
            f"if {k} == confirm:",
            f"{k}_hash = bcrypt.hashpw({k}.encode(), salt)",
            f'{k} = request.headers.get("X-{name.title()}")',
            f"{k}: Optional[str] = None",
            f"{k.upper()} = env('{name.upper()}_{k.upper()}')",
            f"const {k} = await get{name.title()}();",
            f"max_tokens = {g.rng.randint(1, 9999)}",
            f'"{k}": {{"type": "string", "minLength": {g.rng.randint(1, 64)}}},',
            f"{k}: ${{{{ secrets.{name.upper()}_{k.upper()} }}}}",
            f'{k}: "{{{{ {name}_{k} }}}}"',
            f"{name.upper()}_{k.upper()}=${{{name.upper()}_{k.upper()}}}",
            f"{k.upper()}=<your-{k}>",
            f'{k}: "{"*" * g.rng.randint(3, 12)}"',
            f"PWD=/home/{name}/project-{g.hex(4)}",
            f"commit {g.hex(40)}",
            f'"integrity": "sha512-{g.of(B64, 86)}==",',
            f'hash = "sha256:{g.hex(64)}"',
            f"golang.org/x/{name} v0.{g.rng.randint(1, 30)}.0 h1:{g.of(B64, 43)}=",
            f'checksum = "{g.hex(64)}"',
            f"request_id={g.uuid()}",
            f'<img src="data:image/png;base64,{g.of(B64, 400)}==">',
            f"https://github.com/{name}/{name}-service/pull/{g.rng.randint(1, 999)}",
            f"postgres://localhost:{g.rng.randint(1000, 9999)}/{name}",
            f"git@github.com:{name}/repo-{g.hex(4)}.git",
            f"The {k} expires in {g.rng.randint(2, 60)} minutes; enter it again.",
            f"Basic authentication is disabled for /{name}.",
            f"risk-assessment-report-{g.rng.randint(2000, 2030)}-final-version.pdf",
            f"image: ghcr.io/{name}/api@sha256:{g.hex(64)}",
            f'headers["Authorization"] = "Bearer " + {k}',
            f"cache_key = f'{name}:{{user_id}}'",
            f"{k.upper()}_MIN_LENGTH = {g.rng.randint(4, 20)}",
            f"{k}: string;",
            f"{k}: &str,",
            f"client.fetch({k}=tok_{name})",
            f"passwordless_{name} = true",
            f"TOKEN_URL=https://oauth2.example.com/{name}/token",
            f"AUTH_TOKEN_TTL={g.rng.randint(60, 86400)}",
            f"Authorization: Bearer <{k}>",
            f"{name.title()}ServiceClientFactoryBuilder{g.rng.randint(10, 99)}",
            f"echo ${name.upper()}_{k.upper()} | wc -c",
            f"--{k.replace('_', '-')}-file /run/secrets/{name}",
        ]
    return sorted(set(out))


@pytest.fixture
def policy_hooks(tmp_path: Any) -> Any:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([]),
        plugins=[mainspring_policy_pack],
        autoload=False,
        settings=Settings(plugin_options={"mainspring-policy-pack": {"workspace": str(tmp_path)}}),
    )

    def redact(text: str) -> str:
        result = mainspring_policy_pack.after_tool_result(ToolResult(text), agent)
        return text if result is None else result.text

    return redact


def test_no_secret_of_the_corpus_leaks_and_few_look_alikes_are_redacted(policy_hooks: Any) -> None:
    secrets = _secrets(Gen(15))
    non_secrets = _non_secrets(Gen(16))
    assert len(secrets) >= 200 and len(non_secrets) >= 200
    assert len({family for family, _, _ in secrets}) >= 20

    leaked = [
        (family, text)
        for family, text, values in secrets
        if any(value in policy_hooks(text) for value in values)
    ]
    redacted = [text for text in non_secrets if policy_hooks(text) != text]

    print(
        f"\nredaction corpus: {len(leaked)} of {len(secrets)} secrets leaked; "
        f"{len(redacted)} of {len(non_secrets)} non-secrets redacted "
        f"({100 * len(redacted) / len(non_secrets):.1f}%)"
    )
    assert leaked == []
    assert len(redacted) <= 0.02 * len(non_secrets), sorted(set(redacted))
