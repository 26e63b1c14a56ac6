"""Unit tests of lahar.scheduler: conf, the session, actions and plugins, devices and NUMA topology, the runner and simulate."""
