"""The lab's pod runtime (lab/pods/runtime.py): StatefulSets of the API emulator become pods, and pods whose images
the lab knows (lab/pods/images.py) run as real processes on loopback pod IPs. See docs/lab.md."""
