"""The API clients a mission's backend calls, from a kubeconfig or the pod's in-cluster account."""

import kubernetes


def kube_configuration(kubeconfig: str, context: str) -> kubernetes.client.Configuration:
    """A kubeconfig file (and context) if named; else the in-cluster config."""
    configuration = kubernetes.client.Configuration()
    if kubeconfig:
        kubernetes.config.load_kube_config(
            config_file=kubeconfig, context=context or None, client_configuration=configuration
        )
    else:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    return configuration


def api_clients(kubeconfig: str, context: str) -> tuple[kubernetes.client.BatchV1Api, kubernetes.client.CoreV1Api]:
    """The Batch and Core clients of one configured ApiClient."""
    api = kubernetes.client.ApiClient(configuration=kube_configuration(kubeconfig, context))
    return kubernetes.client.BatchV1Api(api), kubernetes.client.CoreV1Api(api)
