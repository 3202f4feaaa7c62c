"""W&B runs that survive a resume (the run id travels in the checkpoint), stay local when W&B cannot be reached
(no answer, a failed TLS handshake, no W&B API at the address), and get the final metrics in their summary."""

from __future__ import annotations

import os
import re
import ssl
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import lightning as L
from omegaconf import DictConfig, open_dict
from rich.markup import escape

from attnmem.callbacks.wandb_run_id import KEY, wandb_logger
from attnmem.runtime import checkpoint, console

# the timeout of the reachability check (which ends within a second more, name lookup included);
# online, W&B itself would wait 90 s, then raise
REACH_SECONDS = 10.0
LOCAL_MODES = ("offline", "dryrun", "disabled")
# what the check asks W&B's GraphQL endpoint (where W&B sends every call): any server of W&B answers it, with or
# without a key; a host without that endpoint answers 404, which W&B would raise as a CommError
QUERY = b'{"query": "{ __typename }"}'


def continue_run(cfg: DictConfig, ckpt_path: str | None) -> None:
    """Point the W&B logger at the run id stored in the checkpoint being resumed (if it has one)."""
    wandb_cfg = (cfg.get("logger") or {}).get("wandb")
    if not wandb_cfg or ckpt_path is None:
        return
    run_id = checkpoint.load(ckpt_path).get(KEY)
    if run_id:
        with open_dict(cfg):
            wandb_cfg.id = run_id
            wandb_cfg.resume = "allow"


def choose_mode(cfg: DictConfig) -> None:
    """Log W&B offline when online would fail: without a key, or (with one note) when its host does not answer,
    fails the TLS handshake or has no W&B API."""
    wandb_cfg = (cfg.get("logger") or {}).get("wandb")
    if not wandb_cfg:
        return
    import wandb  # noqa: F401  (a missing wandb stops here, in one line, whatever the mode: Lightning may not import it)

    if wandb_cfg.get("offline") or wandb_cfg.get("mode") in LOCAL_MODES:
        return
    if os.environ.get("WANDB_MODE") in LOCAL_MODES:
        return
    url = base_url()
    if not _has_key(url):  # W&B raises without credentials; a run with no key stays local instead
        os.environ.setdefault("WANDB_MODE", "offline")
        return
    problem = unreachable(url, REACH_SECONDS, verify=not _tls_unchecked())
    if problem is None:
        return
    os.environ["WANDB_MODE"] = "offline"
    with open_dict(cfg):  # also for a process whose W&B settings were loaded before (a sweep's later jobs)
        wandb_cfg.mode = "offline"
    runs = Path(wandb_cfg.get("save_dir") or wandb_cfg.get("dir") or ".") / "wandb" / "offline-run-*"
    console.note(
        escape(
            f"W&B at {urlsplit(url).netloc or url} is unreachable ({problem}): this run is logged offline; "
            f"upload it later with: wandb sync {runs}"
        )
    )


def base_url() -> str:
    """The W&B server a run would use: WANDB_BASE_URL, else the one `wandb login --host` saved, else W&B's default."""
    import wandb

    settings = wandb.Settings()
    config_dir = Path(os.environ.get("WANDB_CONFIG_DIR", "~/.config/wandb")).expanduser()
    settings.settings_system = str(config_dir / "settings")
    settings.update_from_system_settings()
    settings.update_from_env_vars(dict(os.environ))
    return settings.base_url


def _has_key(url: str) -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    netrc = Path.home() / ".netrc"
    hosts = {"api.wandb.ai", urlsplit(url).hostname or url}
    return netrc.is_file() and any(host in netrc.read_text() for host in hosts)


def unreachable(url: str, seconds: float, *, verify: bool = True) -> str | None:
    """Why W&B's API at `url` cannot be used: no HTTP answer (a timeout of `seconds`, all ending within `seconds` + 1),
    a TLS handshake that fails (unless not `verify`), HTTP 404 from its GraphQL endpoint; None if it answers."""
    found: list[str | None] = []
    endpoint = f"{url.rstrip('/')}/graphql"
    context = ssl.create_default_context()  # the system's CAs and SSL_CERT_FILE, as W&B's own client reads them
    if not verify:  # WANDB_INSECURE_DISABLE_SSL: W&B skips the check too
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE

    def ask() -> None:
        request = urllib.request.Request(endpoint, QUERY, {"Content-Type": "application/json"}, method="POST")
        try:
            urllib.request.urlopen(request, timeout=seconds, context=context).close()
            found.append(None)
        except urllib.error.HTTPError as err:  # an HTTP status: the server is there, but may have no W&B API
            missing = err.code == 404
            found.append(f"HTTP {err.code} {err.reason} from {endpoint}: no W&B server there" if missing else None)
        except urllib.error.URLError as err:
            found.append(_tls(err.reason) if isinstance(err.reason, ssl.SSLError) else _reason(err.reason))
        except ssl.SSLError as err:  # a handshake that fails after the connection (urllib passes it on as it is)
            found.append(_tls(err))
        except (OSError, ValueError) as err:  # a timeout while reading, a malformed URL
            found.append(_reason(err))

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(seconds + 1)  # a name lookup has no timeout of its own: stop waiting for it too
    return found[0] if found else f"no answer within {seconds:g} s"


def _tls_unchecked() -> bool:
    return os.environ.get("WANDB_INSECURE_DISABLE_SSL", "").lower() in ("1", "true", "yes")


def _tls(err: ssl.SSLError) -> str:
    # "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate (_ssl.c:1000)"
    return "TLS handshake failed: " + re.sub(r"^\[SSL: \w+\] |\s*\(_ssl\.c:\d+\)$", "", str(err))


def _reason(err: object) -> str:
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


def log_summary(trainer: L.Trainer, metrics: dict[str, float]) -> None:
    """Put the run's final metrics (those of metrics.json) into the W&B run summary."""
    logger = wandb_logger(trainer)
    if logger is not None and trainer.is_global_zero:
        logger.experiment.summary.update(metrics)
