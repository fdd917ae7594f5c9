"""Backends carry out what ``MPIJobClient`` is asked: ``Backend`` is the interface,
``KubernetesBackend`` the one for a cluster (over ``KubernetesAPI``, the thin layer on the
official client)."""

from .base import Backend
from .kube_api import KubernetesAPI
from .kubernetes import KubernetesBackend

__all__ = ["Backend", "KubernetesAPI", "KubernetesBackend"]
