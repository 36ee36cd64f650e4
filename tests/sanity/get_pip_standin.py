# Offline stand-in for the get-pip.py that ansible-test downloads to bootstrap pip in its venvs.
# ensurepip runs in a subprocess: in-process it sets PIP_CONFIG_FILE=/dev/null, which hides the
# machine's pip.conf (CA bundle) and breaks the install that follows.
import subprocess
import sys

subprocess.check_call([sys.executable, '-m', 'ensurepip', '--default-pip'])
args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
sys.exit(subprocess.call([sys.executable, '-m', 'pip', 'install', '--upgrade'] + args))
