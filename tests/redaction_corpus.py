"""A corpus for veil's secret redaction: realistic credentials in the places tool output shows
them, and look-alikes that must survive (hashes, UUIDs, images, ids, code that names secrets).

Every credential is built here at test time from its documented prefix and a random body of
the documented alphabet and length (seeded, so runs are repeatable); no credential-shaped
string is written in the repository, so no secret scanner (GitHub push protection) stops a
push, and none of these values is a live key. Prefixes are split (``"gh" + "p_"``) for the
same reason.

:func:`secret_cases` returns :class:`SecretCase` (text, the secrets it holds, the placeholder
NAME each must get); :func:`lookalike_cases` returns texts a redactor must leave unchanged.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

B62 = string.ascii_letters + string.digits
B64URL = B62 + "-_"
B64 = B62 + "+/"
HEX = "0123456789abcdef"
BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


@dataclass(frozen=True)
class SecretCase:
    """A text as a tool would print it, the secrets in it and the NAME each must be given."""

    label: str
    text: str
    secrets: tuple[tuple[str, str], ...]  # (secret, expected placeholder NAME)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)

    def body(self, n: int, alphabet: str = B62) -> str:
        # at least one digit, one lower and one upper letter where the alphabet has them, as
        # any long random key has
        while True:
            s = "".join(self.rnd.choice(alphabet) for _ in range(n))
            if n < 12 or all(
                any(c in group for c in s)
                for group in (string.digits, string.ascii_lowercase, string.ascii_uppercase)
                if any(c in group for c in alphabet)
            ):
                return s

    def password(self, n: int = 14) -> str:
        return self.body(n - 2) + self.rnd.choice("!#%^") + str(self.rnd.randrange(10))

    def b64url(self, data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    def jwt(self) -> str:
        header = self.b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = self.b64url(
            json.dumps({"sub": str(self.rnd.randrange(10**9)), "iat": 1700000000}).encode()
        )
        return f"{header}.{payload}.{self.body(43, B64URL)}"

    def pem(self, label: str, lines: int = 8) -> str:
        body = "\n".join(self.body(64, B64) for _ in range(lines))
        return f"-----BEGIN {label}-----\n{body}\n{self.body(20, B64)}==\n-----END {label}-----"


def secret_cases(seed: int = 17) -> list[SecretCase]:
    """At least 30 credential shapes, each in a realistic context."""
    g = _Gen(seed)
    cases: list[SecretCase] = []

    def add(label: str, template: str, *secrets: tuple[str, str]) -> None:
        text = template.format(*[s for s, _ in secrets])
        cases.append(SecretCase(label, text, tuple(secrets)))

    sk = "s" + "k-"
    add(
        "OpenAI project key in a shell profile",
        "export OPENAI_API_KEY={}\nexport PATH=$HOME/bin:$PATH",
        (sk + "proj-" + g.body(120, B64URL), "openai_key"),
    )
    add(
        "OpenAI legacy key in Python",
        'import openai\nopenai.api_key = "{}"\n',
        (sk + g.body(20) + "T3Blbk" + "FJ" + g.body(20), "openai_key"),
    )
    add(
        "DeepSeek key in YAML",
        "llm:\n  provider: deepseek\n  DEEPSEEK_API_KEY: {}\n",
        (sk + g.body(32, HEX), "openai_key"),
    )
    add(
        "Anthropic key in a JSON config",
        '{{"apiKey": "{}", "model": "claude-sonnet-4"}}',
        (sk + "ant-api03-" + g.body(93, B64URL) + "AA", "anthropic_key"),
    )
    add(
        "OpenRouter key in auth.json (seed 000's shape)",
        '{{"providers": {{"openrouter": {{"type": "openai", "base_url": '
        '"https://openrouter.ai/api/v1", "api_key": "{}"}}}}}}',
        (sk + "or-v1-" + g.body(64, HEX), "openrouter_key"),
    )
    add(
        "Google API key in a request URL",
        "GET https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={} 200",
        ("AI" + "za" + g.body(35, B64URL), "google_api_key"),
    )
    add(
        "GitHub classic token in .env",
        "GITHUB_TOKEN={}\nGITHUB_OWNER=acme\n",
        ("gh" + "p_" + g.body(36), "github_token"),
    )
    add(
        "GitHub app token in git remote -v",
        "origin\thttps://x-access-token:{}@github.com/acme/app.git (fetch)",
        ("gh" + "s_" + g.body(36), "github_token"),
    )
    add(
        "GitHub fine-grained token in gh auth status",
        "github.com\n  Logged in to github.com account octocat\n  - Token: {}\n",
        ("github" + "_pat_" + g.body(22) + "_" + g.body(59), "github_token"),
    )
    add(
        "GitHub OAuth token in gh's hosts.yml",
        "github.com:\n    user: octocat\n    oauth_token: {}\n    git_protocol: https\n",
        ("gh" + "o_" + g.body(36), "github_token"),
    )
    add(
        "GitLab personal access token",
        'curl --header "PRIVATE-TOKEN: {}" https://gitlab.example.com/api/v4/projects',
        ("gl" + "pat-" + g.body(20, B64URL), "gitlab_token"),
    )
    add(
        "Slack bot token",
        "SLACK_BOT_TOKEN={}",
        (
            "xo" + "xb-" + str(g.rnd.randrange(10**10, 10**11)) + "-"
            f"{g.rnd.randrange(10**11, 10**12)}-" + g.body(24),
            "slack_token",
        ),
    )
    add(
        "Slack incoming webhook",
        "webhook_url: https://hooks.slack.com/services/{}",
        (f"T{g.body(8, BASE32)}/B{g.body(8, BASE32)}/{g.body(24)}", "slack_webhook"),
    )
    add(
        "Stripe live secret key",
        "stripe.api_key = '{}'",
        ("sk" + "_live_" + g.body(24), "stripe_key"),
    )
    add(
        "Stripe restricted key in a log line",
        "2025-03-02 10:14:07 INFO using restricted key {} for refunds",
        ("rk" + "_live_" + g.body(99), "stripe_key"),
    )
    add(
        "Stripe webhook secret in .env",
        "STRIPE_WEBHOOK_SECRET={}",
        ("wh" + "sec_" + g.body(32), "stripe_key"),
    )
    add(
        "AWS access key id in aws sts get-caller-identity debug output",
        "DEBUG - Using access key {} from environment variables\n"
        '{{"UserId": "AIDAEXAMPLEUSERID", "Account": "123456789012"}}',
        ("AK" + "IA" + g.body(16, BASE32), "aws_access_key"),
    )
    add(
        "AWS credentials file",
        "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
        ("AK" + "IA" + g.body(16, BASE32), "aws_access_key"),
        (g.body(40, B64), "aws_secret_key"),
    )
    add(
        "AWS STS credentials as JSON",
        '{{"Credentials": {{"AccessKeyId": "{}", "SecretAccessKey": "{}", '
        '"SessionToken": "{}", "Expiration": "2025-03-02T12:00:00Z"}}}}',
        ("AS" + "IA" + g.body(16, BASE32), "aws_access_key"),
        (g.body(40, B64), "aws_secret_key"),
        (g.body(300, B64), "assignment:SessionToken"),
    )
    add(
        "Hugging Face token",
        "HF_TOKEN={} huggingface-cli download meta-llama/Llama-3.2-1B",
        ("h" + "f_" + g.body(34, string.ascii_letters), "huggingface_token"),
    )
    add(
        "npm token in .npmrc",
        "//registry.npmjs.org/:_authToken={}\nregistry=https://registry.npmjs.org/\n",
        ("np" + "m_" + g.body(36), "npm_token"),
    )
    add(
        "JWT in a cookie",
        "< Set-Cookie: session={}; Path=/; HttpOnly",
        (g.jwt(), "jwt"),
    )
    add(
        "Bearer token in curl -v",
        "> GET /v1/me HTTP/1.1\n> Host: api.example.com\n> Authorization: Bearer {}\n",
        (g.body(40, B64URL), "bearer"),
    )
    add(
        "Basic credentials in an HTTP dump",
        "Authorization: Basic {}\r\nAccept: */*\r\n",
        (base64.b64encode(f"deploy:{g.password()}".encode()).decode(), "basic"),
    )
    add(
        "curl -u user:password",
        "$ curl -u admin:{} https://jenkins.example.com/api/json",
        (g.password(), "user_password"),
    )
    add(
        "RSA private key",
        "$ cat deploy_key.pem\n{}\n$ ",
        (g.pem("RSA PRIVATE KEY"), "private_key"),
    )
    add(
        "OpenSSH private key",
        "{}",
        (g.pem("OPENSSH PRIVATE KEY", lines=5), "private_key"),
    )
    add(
        "Database URL",
        "DATABASE_URL=postgres://app:{}@db.internal:5432/app",
        (g.password(16), "url_password"),
    )
    add(
        "Redis URL with no user",
        "REDIS_URL=redis://:{}@cache:6379/0",
        (g.body(24), "url_password"),
    )
    add(
        "MySQL DSN (Go driver)",
        'dsn := "root:{}@tcp(127.0.0.1:3306)/shop?parseTime=true"',
        (g.password(), "url_password"),
    )
    add(
        "YAML password",
        "database:\n  host: db\n  user: app\n  password: {}\n",
        (g.password(), "assignment:password"),
    )
    add(
        "Django SECRET_KEY",
        "SECRET_KEY = 'django-insecure-{}'",
        (g.body(50, B62 + "!@#%^&-_=+"), "assignment:SECRET_KEY"),
    )
    add(
        "OAuth client secret in JSON",
        '{{"client_id": "1234.apps.example.com", "client_secret": "{}"}}',
        (g.body(32, B64URL), "assignment:client_secret"),
    )
    add(
        "INI database password",
        "[database]\nhost = localhost\npassword = {}\n",
        (g.password(), "assignment:password"),
    )
    add(
        "password flag",
        "$ pg_dump --username app --password {} --host db shop > dump.sql",
        (g.password(), "assignment:password"),
    )
    add(
        "XML password",
        "<datasource><username>app</username><password>{}</password></datasource>",
        (g.password(), "assignment:password"),
    )
    add(
        "API key header",
        "X-API-Key: {}\nContent-Type: application/json",
        (g.body(32, HEX), "assignment:X-API-Key"),
    )
    add(
        "Google OAuth access token",
        "access token: {}",
        ("ya" + "29." + g.body(120, B64URL), "google_oauth_token"),
    )
    add(
        "SendGrid key",
        "SENDGRID_API_KEY={}",
        ("S" + "G." + g.body(22, B64URL) + "." + g.body(43, B64URL), "sendgrid_key"),
    )
    add(
        "PyPI upload token in .pypirc",
        "[pypi]\n  username = __token__\n  password = {}\n",
        ("py" + "pi-AgEIcHlwaS5vcmc" + g.body(120, B64URL), "pypi_token"),
    )
    add(
        "DigitalOcean token",
        "doctl auth init --access-token {}",
        ("do" + "p_v1_" + g.body(64, HEX), "digitalocean_token"),
    )
    add(
        "Telegram bot token",
        "bot = telebot.TeleBot('{}')",
        (f"{g.rnd.randrange(10**8, 10**9)}:AA{g.body(33, B64URL)}", "telegram_bot_token"),
    )
    public = "age1" + g.body(58, BECH32).lower()  # the public half stays
    add(
        "age secret key",
        "# created: 2025-03-02T10:00:00Z\n# public key: " + public + "\n{}\n",
        ("AGE-SECRET-" + "KEY-1" + g.body(58, BECH32), "age_secret_key"),
    )
    add(
        "Azure storage connection string",
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acme;"
        "AccountKey={}==;EndpointSuffix=core.windows.net",
        (g.body(86, B64), "assignment:AccountKey"),
    )
    add(
        "Groq key",
        "GROQ_API_KEY={}",
        ("gs" + "k_" + g.body(52), "groq_key"),
    )
    add(
        ".netrc entry",
        "machine api.heroku.com\n  login me@example.com\n  password {}\n",
        (g.body(36, HEX + "-"), "netrc_password"),
    )
    add(
        "Kubernetes secret token",
        "apiVersion: v1\nkind: Secret\ndata:\n  token: {}\n",
        (g.body(64, B64), "assignment:token"),
    )
    esc = "\x1b"
    add(
        "GitHub token in coloured output (escape glued to it)",
        "token: " + esc + "[31m{}" + esc + "[0m\n",
        ("gh" + "p_" + g.body(36), "github_token"),
    )
    add(
        "password name coloured by grep --color=always",
        "config/.env:3:DB_" + esc + "[01;31m" + esc + "[KPASSWORD" + esc + "[m" + esc + "[K={}\n",
        (g.password(), "assignment:DB_PASSWORD"),
    )
    add(
        "GitHub token in a printf command (escape written as \\033)",
        "printf 'token: \\033[31m{}\\033[0m'",
        ("gh" + "o_" + g.body(36), "github_token"),
    )
    add(
        "password holding an ampersand",
        "password: {}\n",
        (g.body(9) + "&" + g.body(6), "assignment:password"),
    )
    add(
        "env password holding an ampersand and a dollar",
        "DB_PASSWORD={}\n",
        (g.body(7) + "&" + g.body(5) + "$" + g.body(10).lower(), "assignment:DB_PASSWORD"),
    )
    add(
        "session cookie in a request header",
        "curl -H 'Cookie: theme=dark; session={}' https://app.example.com/\n",
        (g.body(32), "cookie"),
    )
    add(
        "URL-encoded api_key in a redirect",
        "Location: /login?next=%2Fdata%3Fapi_key%3D{}%26page%3D2\n",
        (g.body(32), "assignment:api_key"),
    )
    add(
        "access token in a query string followed by another parameter",
        "GET /cb?access_token={}&page=2 HTTP/1.1\n",
        (g.body(40), "assignment:access_token"),
    )
    # an AWS secret access key printed with no telling name, near its key id (issue 33)
    add(
        "AWS secret printed on its own after its key id (aws configure get)",
        "$ aws configure get aws_access_key_id\n{}\n"
        "$ aws configure get aws_secret_access_key\n{}\n",
        ("AK" + "IA" + g.body(16, BASE32), "aws_access_key"),
        (g.body(40, B64), "aws_secret_key"),
    )
    add(
        "AWS key pair in aws configure list",
        "      Name                    Value             Type    Location\n"
        "      ----                    -----             ----    --------\n"
        "   profile                <not set>             None    None\n"
        "access_key     {} shared-credentials-file\n"
        "secret_key     {} shared-credentials-file\n"
        "    region                us-east-1      config-file    ~/.aws/config\n",
        ("AK" + "IA" + g.body(16, BASE32), "aws_access_key"),
        (g.body(40, B64), "aws_secret_key"),
    )
    add(
        "AWS key pair in a CI job's environment under names that say nothing",
        "Run ./deploy.sh\n  env:\n    DEPLOY_ID: {}\n    DEPLOY_SK: {}\n    REGION: eu-west-1\n",
        ("AS" + "IA" + g.body(16, BASE32), "aws_access_key"),
        (g.body(40, B64), "aws_secret_key"),
    )
    add(
        "AWS credentials.csv from the IAM console",
        "User name,Access key ID,Secret access key\nci-deployer,{},{}\n",
        ("AK" + "IA" + g.body(16, BASE32), "aws_access_key"),
        (g.body(40, B64), "aws_secret_key"),
    )
    return cases


def known_secret_case(seed: int = 17) -> tuple[str, str]:
    """A provider key of no known shape (veil knows it from auth.json) and a text showing it."""
    key = _Gen(seed + 1).body(40, HEX)
    return key, f"together: using {key} for requests"


def lookalike_cases(seed: int = 17) -> list[tuple[str, str]]:
    """At least 30 ``(label, text)`` pairs a redactor must return unchanged."""
    g = _Gen(seed + 2)
    sha1 = g.body(40, HEX)
    sha256 = g.body(64, HEX)
    uuid = (
        f"{g.body(8, HEX)}-{g.body(4, HEX)}-4{g.body(3, HEX)}-a{g.body(3, HEX)}-{g.body(12, HEX)}"
    )
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(g.rnd.randrange(256) for _ in range(300)))
    return [
        ("git log", f"commit {sha1}\nAuthor: Dev <dev@example.com>\n\n    Fix the parser"),
        ("git short SHAs", f"{sha1[:7]} Fix the parser\n{g.body(7, HEX)} Add tests"),
        ("docker digest", f"python:3.11-slim@sha256:{sha256}"),
        ("pip hash", f"requests==2.31.0 --hash=sha256:{sha256}"),
        ("uuid", f'{{"request_id": "{uuid}", "status": "ok"}}'),
        ("npm integrity", f'"integrity": "sha512-{g.body(86, B64)}=="'),
        ("base64 image", f'<img src="data:image/png;base64,{png.decode()}">'),
        ("image JSON", f'{{"type": "image", "data": "{png.decode()}"}}'),
        ("long numeric ids", '{"id": 1234567890123456789, "order": 98765432101234}'),
        ("token limit constant", "TOKEN_LIMIT = 4096\nMAX_TOKENS = 8192"),
        ("max_tokens option", "response = client.chat(max_tokens=1024, temperature=0.2)"),
        ("password field", 'password_field = "password"\nlabel = "Password"'),
        ("api key getter", "def get_api_key(self):\n    return self._api_key"),
        ("key from environment", 'api_key = os.environ["OPENAI_API_KEY"]'),
        ("sort key", "rows = sorted(rows, key=lambda r: r[1])"),
        ("primary key", "id = Column(Integer, primary_key=True)"),
        ("cache key", f'cache_key = "{sha256}"'),
        ("tokenizer tokens", 'eos_token: "</s>"\npad_token: "<pad>"'),
        ("pagination token", f'{{"next_token": "{g.body(40, B64URL)}", "items": []}}'),
        ("bearer placeholder", 'curl -H "Authorization: Bearer $API_TOKEN" https://api'),
        ("bearer template", "Authorization: Bearer <your-token>"),
        ("documented database URL", "postgres://user:password@localhost:5432/mydb"),
        ("URL without password", "https://octocat@github.com/acme/app.git"),
        ("ssh remote", "git@github.com:acme/app.git"),
        ("password from variable", "PASSWORD=${DB_PASSWORD}"),
        ("masked password", 'password: "********"'),
        ("settings from env", 'SECRET_KEY = env("SECRET_KEY")'),
        ("secret key file", 'secret_key_file = "/etc/app/secret.key"'),
        ("ssh public key", f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.body(43, B64)} dev@laptop"),
        (
            "public key and certificate",
            "-----BEGIN PUBLIC KEY-----\n"
            + g.body(64, B64)
            + "\n-----END PUBLIC KEY-----\n-----BEGIN CERTIFICATE-----\n"
            + g.body(64, B64)
            + "\n-----END CERTIFICATE-----",
        ),
        ("hf_hub call", 'path = hf_hub_download(repo_id="gpt2", filename="config.json")'),
        ("scikit-learn", "pip install scikit-learn\nrunning task-0123456789abcdef0123456789ab"),
        ("prose about auth", "Basic Authentication is configured. Bearer tokens are in RFC 6750."),
        ("test names", "tests/test_auth.py::test_password_reset_token_expires PASSED"),
        (
            "go.sum",
            f"github.com/pkg/errors v0.9.1 h1:{g.body(43, B64)}=\n"
            f"github.com/pkg/errors v0.9.1/go.mod h1:{g.body(43, B64)}=",
        ),
        ("secrets module", "token = secrets.token_hex(32)"),
        ("environment listing", "PATH=/usr/local/bin:/usr/bin\nHOME=/root\nPWD=/work/app"),
        ("bare yaml key", "key: my-config-name\nvalue: 42"),
        ("token response fields", '{"token_type": "bearer", "expires_in": 3600}'),
        ("file content in JSON", f'{{"path": "README.md", "content": "{g.body(300, B64)}"}}'),
        ("required field", "Password: Required\nToken: optional"),
        ("Java constant", 'private static final String PASSWORD_PROPERTY = "db.password";'),
        ("camelCase reference", "const token = await getAccessToken(userId);"),
        ("placeholder value", "OPENAI_API_KEY=your_api_key_here"),
        (
            "coloured git log",
            "\x1b[33mcommit " + sha1 + "\x1b[m\nAuthor: Dev <dev@example.com>\n",
        ),
        ("coloured pytest line", "\x1b[32mPASSED\x1b[0m tests/test_auth.py::test_token_refresh"),
        ("query string with ampersands", "GET /items?page=2&sort=asc&token_type=bearer 200"),
        ("shell variable as password", "export DB_PASSWORD=$VAULT_DB_PASSWORD"),
        ("cookie preferences", "Cookie: theme=dark; lang=en-US; consent=true"),
        ("set-cookie attributes", "Set-Cookie: theme=dark; Path=/; Max-Age=3600; HttpOnly"),
        ("URL-encoded query without a secret", "next=%2Fsearch%3Fq%3Dredaction%26page%3D2"),
    ]
