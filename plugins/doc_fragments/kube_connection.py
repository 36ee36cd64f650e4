# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # How to reach the Kubernetes API server; matches KUBE_CONNECTION_SPEC in module_utils/kube/args.py.
    # Names and environment variables are kubernetes.core's (k8s_auth_options), so the same values work.
    DOCUMENTATION = r'''
options:
  kubeconfig:
    description:
      - Path of a kubeconfig file. Can also be given in the E(K8S_AUTH_KUBECONFIG) environment variable.
      - Without O(kubeconfig) and O(host), the pod's service account is used when the module runs in a pod,
        else the file named by E(KUBECONFIG), else C(~/.kube/config).
      - Unlike kubernetes.core, only a path is accepted (not a kubeconfig as a dictionary).
    type: path
  context:
    description:
      - The kubeconfig context to use; the file's current context when not given.
        Can also be given in the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - URL of the API server, such as C(https://10.0.0.1:6443). Can also be given in the E(K8S_AUTH_HOST)
        environment variable.
      - Overrides the server of the kubeconfig; alone (without O(kubeconfig)) it connects without kubeconfig,
        usually with O(api_key).
    type: str
  api_key:
    description:
      - A bearer token for the API server. Can also be given in the E(K8S_AUTH_API_KEY) environment variable.
      - Overrides the credentials of the kubeconfig.
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. Can also be given in the E(K8S_AUTH_VERIFY_SSL)
        environment variable.
      - Not set, the kubeconfig decides (verification on unless it says C(insecure-skip-tls-verify)).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - CA bundle that signed the API server's certificate, overriding the kubeconfig's.
        Can also be given in the E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  request_timeout:
    description: Seconds one API request may take (connect and the whole answer).
    type: float
    default: 30.0
requirements:
  - kubernetes (the Python client)
'''
