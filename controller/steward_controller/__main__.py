# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`python -m steward_controller`: the same program as the `steward-controller` console script."""

import sys

from steward_controller.main import main

sys.exit(main())
