"""Binary units of memory and disk, as the kubelet and Kubernetes quantities count them (Ki, Mi, Gi)."""

KiB = 1024
MiB = 1024**2
GiB = 1024**3
