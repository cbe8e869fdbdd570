"""The default redaction against a corpus of real-shaped secrets and of look-alike
non-secrets, generated deterministically (a fixed seed): no secret may get through, and
at most 2% of the non-secrets may be redacted. The figures are printed (``pytest -s``).

Each secret sample is a snippet as a tool would return it (a ``.env`` line, a config file,
a command's output, a key file read from its second line, grep output...) with the
secret values it holds; a sample leaks if any of them is still in the redacted text.
Real private keys are made for the test (``ssh-keygen``: ed25519, RSA 2048 and 4096,
ECDSA, in OpenSSH and PEM formats; ``cryptography``: PKCS#8 and EC PEM) and shown whole,
from their second line, as ``grep -n`` and ``cat -n`` show them, and one line at a time.
Structured ``details`` hold secrets under their keys' names, at any depth.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import string
import subprocess
from pathlib import Path
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


KEY_TYPES = [
    ("ed25519", ["-t", "ed25519", "-C", "dev@host"]),
    ("rsa2048", ["-t", "rsa", "-b", "2048", "-C", "dev@host"]),
    ("rsa4096", ["-t", "rsa", "-b", "4096", "-C", "dev@host"]),
    ("ecdsa", ["-t", "ecdsa", "-b", "256", "-C", "dev@host"]),
    ("rsa2048_pem", ["-t", "rsa", "-b", "2048", "-m", "PEM", "-C", "dev@host"]),
    ("ecdsa_pem", ["-t", "ecdsa", "-b", "384", "-m", "PEM", "-C", "dev@host"]),
    # the comment's length moves the last line's padding: a few of each
    *((f"ed25519_c{n}", ["-t", "ed25519", "-C", "u" * n]) for n in range(1, 7)),
    *((f"ecdsa_c{n}", ["-t", "ecdsa", "-C", "u" * n]) for n in range(1, 5)),
]


def told_apart_alone(line: str) -> bool:
    """Whether a key's line, read alone, can be told from a word (see the policy pack's
    ``secrets`` module): 40 characters or more, or padded, or holding ``AAA`` (OpenSSH's
    last line always does). A PEM key's last line can be shorter and unpadded (a PKCS#8 RSA
    key's often is: 24 random characters, the end of its CRT coefficient); such lines are
    sampled in context (the whole key, its tail, grep) but not alone. A last line of under
    16 characters is an OpenSSH key's padding (``AQIDBA==``)."""
    if len(line) < 16:
        return False
    return len(line) >= 40 or line.endswith("=") or "AAA" in line


def _real_keys(directory: Path) -> list[tuple[str, str]]:
    """``(name, text)`` of private keys made now; ``ssh-keygen`` or ``cryptography``
    must be there (the test is skipped otherwise)."""
    keys: list[tuple[str, str]] = []
    if shutil.which("ssh-keygen"):
        for name, args in KEY_TYPES:
            path = directory / name
            command = ["ssh-keygen", "-q", *args, "-N", "", "-f", str(path)]
            subprocess.run(command, check=True, capture_output=True, timeout=120)
            keys.append((name, path.read_text()))
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    except ImportError:
        pass
    else:
        pkcs8 = serialization.PrivateFormat.PKCS8
        plain = serialization.NoEncryption()
        pem = serialization.Encoding.PEM
        made = {
            "pkcs8_rsa": rsa.generate_private_key(65537, 2048),
            "pkcs8_ed25519": ed25519.Ed25519PrivateKey.generate(),
            "pkcs8_ec": ec.generate_private_key(ec.SECP256R1()),
        }
        for name, key in made.items():
            keys.append((name, key.private_bytes(pem, pkcs8, plain).decode()))
        traditional = serialization.PrivateFormat.TraditionalOpenSSL
        sec1 = ec.generate_private_key(ec.SECP384R1()).private_bytes(pem, traditional, plain)
        keys.append(("sec1_ec", sec1.decode()))
    if not keys:
        pytest.skip("neither ssh-keygen nor cryptography is available to make keys")
    return keys


def _key_samples(keys: list[tuple[str, str]]) -> list[Sample]:
    """Each key whole, from line 2, its last lines (``tail -n 3``), ``grep -n``,
    ``cat -n``, and every body line alone."""
    out: list[Sample] = []
    for name, text in keys:
        lines = text.rstrip("\n").split("\n")
        body = [line for line in lines if not line.startswith("-----")]
        out.append((f"real_key_{name}", f"$ cat ~/.ssh/id\n{text}", body))
        out.append((f"real_key_{name}_line_2", "\n".join(lines[1:]), body))
        out.append((f"real_key_{name}_tail", "\n".join(lines[-3:]) + "\n", lines[-3:-1]))
        grep = "\n".join(f"id_{name}:{n}:{line}" for n, line in enumerate(lines, 1))
        out.append((f"real_key_{name}_grep", grep, body))
        numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, 1))
        out.append((f"real_key_{name}_cat_n", numbered, body))
        for line in body:
            if told_apart_alone(line):
                out.append((f"real_key_{name}_one_line", line + "\n", [line]))
    return out


DETAIL_KEYS = [
    "password",
    "Password",
    "PASSWD",
    "token",
    "accessToken",
    "refresh_token",
    "secret",
    "client-secret",
    "api_key",
    "apiKey",
    "X-Api-Key",
    "authorization",
    "Authorization",
    "private_key",
    "privateKey",
]


def _detail_samples(g: Gen) -> list[tuple[str, Any, list[str]]]:
    """``details`` values holding secrets under secret-naming keys, flat and nested."""
    out: list[tuple[str, Any, list[str]]] = []
    for key in DETAIL_KEYS:
        plain, number, words = g.alnum(12), g.rng.randint(100000, 999999), g.word() + g.alnum(5)
        out.append((f"details_{key}", {key: plain, "user": "bob"}, [plain]))
        out.append((f"details_{key}_nested", {"db": {"conn": [{key: words}]}}, [words]))
        out.append((f"details_{key}_number", {"login": {key: number}}, [str(number)]))
    return out


def _detail_non_secrets(g: Gen) -> list[Any]:
    """Look-alike ``details``: counts, flags, empty values, names that only contain a word."""
    out: list[Any] = []
    for _ in range(4):
        n = g.rng.randint(1, 9999)
        out += [
            {"max_tokens": n, "tokens": {"input": n, "output": n + 1}},
            {"password_length": n, "has_password": True, "token_count": n},
            {"secret_santa": g.word(), "passwordless": True},
            {"token": None, "password": "", "api_key": False},
            {"tokenizer": g.word(), "authorization_url": f"https://{g.word()}.example/auth"},
            {"exit_code": n % 256, "timed_out": False, "output_chars": n, "truncated": False},
        ]
    return out


def _bare_look_alikes(g: Gen) -> list[str]:
    """Single-token lines a key line must not be confused with."""
    out: list[str] = []
    for _ in range(6):
        name = g.word()
        out += [
            f"usr/lib/{name}/Python{g.rng.randint(2, 3)}",
            f"{name.title()}ServiceImpl{g.rng.randint(10, 99)}",
            f"src/{name}/Main{g.rng.randint(1, 9)}",
            g.hex(40),
            f"{name.upper()}_{g.upper(6)}_V{g.rng.randint(1, 9)}",
            f"{name}/{name}-{g.rng.randint(1, 9)}",
            f"/home/{name.title()}/Projects{g.rng.randint(1, 99)}",
        ]
    phrases = ["Hello, World!", "release notes v2", "build 42 passed", "meeting at 10am"]
    # base64 of plain text, alone on a line: a key's last line looks the same
    out += [base64.b64encode(p.encode()).decode() for p in phrases]
    return out


@pytest.fixture(scope="module")
def real_keys(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    return _real_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def policy_hooks(tmp_path: Any) -> Any:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([]),
        plugins=[mainspring_policy_pack],
        autoload=False,
        settings=Settings(plugin_options={"mainspring-policy-pack": {"workspace": str(tmp_path)}}),
    )

    def redact(value: Any) -> Any:
        """What the model and the records get of a result with this text, or these
        ``details``: the redacted text, or the redacted details as JSON."""
        text, details = (value, None) if isinstance(value, str) else ("", value)
        original = ToolResult(text, details=details)
        result = mainspring_policy_pack.after_tool_result(original, agent) or original
        return result.text if isinstance(value, str) else json.dumps(result.details)

    return redact


def test_no_secret_of_the_corpus_leaks_and_few_look_alikes_are_redacted(
    policy_hooks: Any, real_keys: list[tuple[str, str]]
) -> None:
    secrets: list[tuple[str, Any, list[str]]] = [
        *_secrets(Gen(15)),
        *_key_samples(real_keys),
        *_detail_samples(Gen(17)),
    ]
    non_secrets: list[Any] = [
        *_non_secrets(Gen(16)),
        *_detail_non_secrets(Gen(18)),
        *_bare_look_alikes(Gen(19)),
    ]
    assert len(secrets) >= 300 and len(non_secrets) >= 300
    assert len({family for family, _, _ in secrets}) >= 20

    leaked = [
        (family, text)
        for family, text, values in secrets
        if any(value in policy_hooks(text) for value in values)
    ]
    unchanged = [json.dumps(v) if not isinstance(v, str) else v for v in non_secrets]
    redacted = [
        value
        for value, shown in zip(non_secrets, unchanged, strict=True)
        if policy_hooks(value) != shown
    ]

    print(
        f"\nredaction corpus: {len(leaked)} of {len(secrets)} secrets leaked "
        f"({len(real_keys)} real private keys); {len(redacted)} of {len(non_secrets)} "
        f"non-secrets redacted ({100 * len(redacted) / len(non_secrets):.1f}%)"
    )
    assert leaked == []
    assert len(redacted) <= 0.02 * len(non_secrets), redacted
