"""The API clients a mission's backend calls, from a kubeconfig or the pod's in-cluster account."""

import kubernetes
import yaml
from urllib3.util.retry import Retry

from catchup_assets.core.errors import ConfigError

# urllib3's default (Retry(3), which the client keeps when `Configuration.retries` is None) less its status
# retries: on a GET answered 429 or 503 with Retry-After it sleeps that long itself, in wall time, uncapped,
# under the backend's own tries. The backend's retry (api_calls.py, backoff.py) is the one layer that waits
# for a status: capped, within a pass's budget, on the injected sleeper a stop interrupts (issue 36 item 8).
# Connection and read errors are still retried here, as before.
NO_STATUS_RETRIES = Retry(total=3, respect_retry_after_header=False, status_forcelist=None)


def kube_configuration(kubeconfig: str, context: str) -> kubernetes.client.Configuration:
    """A kubeconfig file (and context) if named; else the in-cluster config.

    One that cannot be loaded is a ConfigError naming the setting and the file (issue 36 item 13):
    an operator's `cleanup` or `logs` says so in one line, not the client's traceback."""
    configuration = kubernetes.client.Configuration()
    try:
        if kubeconfig:
            kubernetes.config.load_kube_config(
                config_file=kubeconfig, context=context or None, client_configuration=configuration
            )
        else:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
    # ConfigException: no such file or context, no in-cluster account; the rest: a file that is
    # unreadable, not YAML, or YAML that is not a kubeconfig (a list where a map goes).
    except (kubernetes.config.ConfigException, OSError, yaml.YAMLError, ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(_unusable(kubeconfig, context, exc)) from None
    return configuration


def backend_client(configuration: kubernetes.client.Configuration) -> kubernetes.client.ApiClient:
    """An ApiClient over `configuration` as the backend's always is: urllib3's status retries off.

    A run's loaded configuration and a test harness's hand-built one (a simulated or proxied host)
    both come through here, so the fault suites prove the client production builds (issue 45 item 8)."""
    configuration.retries = NO_STATUS_RETRIES
    return kubernetes.client.ApiClient(configuration=configuration)


def _unusable(kubeconfig: str, context: str, exc: Exception) -> str:
    why = " ".join(str(exc).split())[:300] or type(exc).__name__
    if not kubeconfig:
        return (
            "kubernetes.kubeconfig: not set, so the in-cluster config was tried, and this is not a pod "
            f"with a service account ({why}): set kubernetes.kubeconfig to a kubeconfig file"
        )
    in_context = f" (context {context!r})" if context else ""
    return f"kubernetes.kubeconfig: {kubeconfig}{in_context} is not a usable kubeconfig: {why}"


def api_clients(kubeconfig: str, context: str) -> tuple[kubernetes.client.BatchV1Api, kubernetes.client.CoreV1Api]:
    """The Batch and Core clients of one configured ApiClient."""
    api = backend_client(kube_configuration(kubeconfig, context))
    return kubernetes.client.BatchV1Api(api), kubernetes.client.CoreV1Api(api)
