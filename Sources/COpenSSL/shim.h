// OpenSSL 3 (libssl, libcrypto): the local CA and, later, the TLS record layer. Only
// LarderTLS's OpenSSL.swift imports this module. The helpers below stand in for macros
// and variadic functions Swift cannot call.
#ifndef LARDER_COPENSSL_SHIM_H
#define LARDER_COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <string.h>

/// A new ECDSA P-256 key (EVP_EC_gen is a macro over a variadic function).
static inline EVP_PKEY *larder_ec_p256(void) { return EVP_EC_gen("P-256"); }

/// XN_FLAG_RFC2253, a macro over other macros.
static inline unsigned long larder_name_flags_rfc2253(void) { return XN_FLAG_RFC2253; }

/// The `index`th name of GENERAL_NAME type `type` (GEN_DNS, GEN_EMAIL, GEN_URI: IA5 strings)
/// a certificate's Name Constraints permit (RFC 5280 §4.2.1.10), copied into `out`: its
/// length; -1 past the last; -2 when the certificate has no Name Constraints; -3 when the
/// name does not fit `capacity` (the macros over OpenSSL's typed stacks cannot be called
/// from Swift).
static inline int larder_permitted_name(const X509 *cert, int type, int index, char *out, int capacity) {
    NAME_CONSTRAINTS *constraints = X509_get_ext_d2i(cert, NID_name_constraints, NULL, NULL);
    if (constraints == NULL) return -2;
    int result = -1, seen = 0;
    STACK_OF(GENERAL_SUBTREE) *permitted = constraints->permittedSubtrees;
    for (int i = 0; permitted != NULL && i < sk_GENERAL_SUBTREE_num(permitted); i++) {
        GENERAL_SUBTREE *subtree = sk_GENERAL_SUBTREE_value(permitted, i);
        if (subtree->base->type != type || seen++ != index) continue;
        ASN1_IA5STRING *name = subtree->base->d.ia5;
        int length = ASN1_STRING_length(name);
        if (length < 0 || length >= capacity) {
            result = -3;
        } else {
            memcpy(out, ASN1_STRING_get0_data(name), (size_t)length);
            out[length] = 0;
            result = length;
        }
        break;
    }
    NAME_CONSTRAINTS_free(constraints);
    return result;
}

/// GEN_DNS, GEN_EMAIL and GEN_URI (macros Swift may not import by these names).
static inline int larder_gen_dns(void) { return GEN_DNS; }
static inline int larder_gen_email(void) { return GEN_EMAIL; }
static inline int larder_gen_uri(void) { return GEN_URI; }

/// The SNI callback and its argument (both macros over SSL_CTX_callback_ctrl / SSL_CTX_ctrl).
static inline void larder_set_servername_callback(SSL_CTX *context, int (*callback)(SSL *, int *, void *), void *argument) {
    SSL_CTX_set_tlsext_servername_callback(context, callback);
    SSL_CTX_set_tlsext_servername_arg(context, argument);
}

/// Server-side settings that are macros: TLS 1.2 at least, partial writes from a moving
/// buffer (non-blocking writes of what the socket takes), the kernel's TLS offload where it
/// exists (OpenSSL falls back to user space when the kernel has none), and read-ahead (one
/// read(2) takes what the socket holds, rather than one for a record's header and one for
/// its body).
static inline int larder_configure_server(SSL_CTX *context) {
    SSL_CTX_set_read_ahead(context, 1);
    SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_ENABLE_KTLS);
    return SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
}

/// Whether a queued error is an alert the peer sent (OpenSSL files those as reasons from
/// SSL_AD_REASON_OFFSET up; ERR_GET_REASON is an inline Swift does not see through).
static inline int larder_error_is_alert(unsigned long code) {
    return ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) >= SSL_AD_REASON_OFFSET;
}

/// Whether a queued error says the peer closed the connection in the middle of a record or
/// a handshake (OpenSSL 3 reports that as an error, not as SSL_ERROR_SYSCALL).
static inline int larder_error_is_eof(unsigned long code) {
    return ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
}

/// Whether the session's sending direction is in the kernel (kTLS), so SSL_sendfile works
/// (BIO_get_ktls_send is a macro).
static inline int larder_ktls_send(SSL *ssl) { return BIO_get_ktls_send(SSL_get_wbio(ssl)) == 1; }

#endif
