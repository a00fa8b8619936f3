// A throwaway self-signed TLS certificate for tests (EC P-256, SAN
// IP:127.0.0.1 and DNS:localhost, valid one day), made with OpenSSL's API at
// run time so no private key is ever checked in.
#pragma once

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <string>

namespace outbox::testing_support {

// Writes `cert_path` and `key_path` (PEM); false on any OpenSSL failure.
inline bool WriteSelfSignedCert(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  bool ok = key != nullptr && x != nullptr;
  if (ok) {
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_version(x, 2);
    X509_set_pubkey(x, key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("outbox-test"), -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
    X509_EXTENSION* san =
        X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
    ok = san != nullptr && X509_add_ext(x, san, -1) == 1 && X509_sign(x, key, EVP_sha256()) > 0;
    X509_EXTENSION_free(san);
  }
  if (ok) {
    FILE* c = std::fopen(cert_path.c_str(), "w");
    FILE* k = std::fopen(key_path.c_str(), "w");
    ok = c != nullptr && k != nullptr && PEM_write_X509(c, x) == 1 &&
         PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
    if (c) std::fclose(c);
    if (k) std::fclose(k);
  }
  X509_free(x);
  EVP_PKEY_free(key);
  return ok;
}

}  // namespace outbox::testing_support
