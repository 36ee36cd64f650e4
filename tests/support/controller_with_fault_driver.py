"""`steward-controller` with one more machine driver: the test double of fault_driver.py (provider InitFault),
registered through the controller's own extension point before its main() runs. Everything else is the real
program; ControllerProcess(program=<this file>) starts it as it starts `python -m steward_controller`."""

import os
import sys

# tests/ (for `support`) in place of this script's own directory, whose ansible.py would hide the real package
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from steward_controller.machines.drivers import register_driver  # noqa: E402  pylint: disable=wrong-import-position
from steward_controller.main import main  # noqa: E402  pylint: disable=wrong-import-position

from support.fault_driver import PROVIDER, InitFaultDriver  # noqa: E402  pylint: disable=wrong-import-position

register_driver(PROVIDER, lambda _controller: InitFaultDriver())
sys.exit(main())
