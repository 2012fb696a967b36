"""Range Jobs on Kubernetes. Importing any module here first makes the kubernetes client import lean (`lean_import`)."""

from catchup_assets.backends.kubernetes.lean_import import install

install()
