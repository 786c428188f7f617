// libsystemd's service-manager interface (sd-daemon) and journal detection. Only
// LarderServer's Systemd.swift imports this module.
#ifndef LARDER_CSYSTEMD_SHIM_H
#define LARDER_CSYSTEMD_SHIM_H

#include <systemd/sd-daemon.h>

#endif
