// libxcrypt's crypt(3) family: password hashing for proxy authentication. Only
// LarderServer's PasswordHash.swift imports this module.
#ifndef LARDER_CCRYPT_SHIM_H
#define LARDER_CCRYPT_SHIM_H

#include <crypt.h>

#endif
