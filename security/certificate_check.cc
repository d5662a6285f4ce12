#include "security/certificate_check.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <ctime>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace podprof::security {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreCtx = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// "tls.cert (/etc/podprof/tls/agent.crt)"
std::string Where(const char* key, const std::string& path) {
  return path.empty() ? std::string(key) : absl::StrCat(key, " (", path, ")");
}

// A key file's password prompt: there is nobody to ask.
int NoPassword(char*, int, int, void*) { return -1; }

std::string Utc(int64_t ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

int64_t NotAfterNs(const X509* cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
  return int64_t{timegm(&tm)} * 1'000'000'000;
}

std::string NameText(const X509_NAME* name) {
  char buf[256];
  X509_NAME_oneline(name, buf, sizeof(buf));
  return buf;
}

void AddNames(const X509* cert, CertificateSummary* s) {
  char cn[256];
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn)) > 0) {
    s->common_name = cn;
    s->names.push_back(cn);
  }
  Names sans(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans.get(), i);
    std::string name;
    if (n->type == GEN_DNS) {
      const ASN1_STRING* dns = n->d.dNSName;
      name.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                  ASN1_STRING_length(dns));
    } else if (n->type == GEN_IPADD && ASN1_STRING_length(n->d.iPAddress) == 4) {
      const unsigned char* ip = ASN1_STRING_get0_data(n->d.iPAddress);
      name = absl::StrCat(ip[0], ".", ip[1], ".", ip[2], ".", ip[3]);
    }
    // The CN is often repeated as a SAN: each name once.
    if (!name.empty() && std::find(s->names.begin(), s->names.end(), name) == s->names.end()) {
      s->names.push_back(std::move(name));
    }
  }
}

// Only URI SANs give roles: a CN or DNS name that happens to read "urn:podprof:role:operator"
// is a name, which an allow list may list, never a role.
void AddRoles(const X509* cert, CertificateSummary* s) {
  Names sans(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans.get(), i);
    if (n->type != GEN_URI) continue;
    const ASN1_STRING* uri = n->d.uniformResourceIdentifier;
    absl::string_view text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                           ASN1_STRING_length(uri));
    if (!absl::ConsumePrefix(&text, kRoleUriPrefix) || text.empty()) continue;
    std::string role(text);
    if (std::find(s->roles.begin(), s->roles.end(), role) == s->roles.end()) {
      s->roles.push_back(std::move(role));
    }
  }
}

}  // namespace

std::vector<std::string> CertificateNames(const x509_st* cert) {
  CertificateSummary s;
  if (cert != nullptr) AddNames(cert, &s);
  return s.names;
}

std::vector<std::string> CertificateRoles(const x509_st* cert) {
  CertificateSummary s;
  if (cert != nullptr) AddRoles(cert, &s);
  return s.roles;
}

std::vector<std::string> PemCertificateRoles(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    ERR_clear_error();
    return {};
  }
  return CertificateRoles(cert.get());
}

namespace {

// The private key, refusing an encrypted one: a daemon cannot ask for its password.
absl::StatusOr<Key> ReadKey(const TlsMaterial& m) {
  const std::string where = Where("tls.key", m.key_path);
  if (absl::StrContains(m.key, "ENCRYPTED")) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     " is encrypted: podprof reads unencrypted keys (protect the key with file "
                     "permissions, or hand it over as a systemd credential)"));
  }
  Bio bio = MemoryBio(m.key);
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassword, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " holds no private key that OpenSSL reads"));
  }
  return key;
}

// Whether `cert` chains to a certificate of the bundle at `now_ns`, or OpenSSL's reason why not.
absl::Status CheckChain(const TlsMaterial& m, X509* cert, int64_t now_ns) {
  Store store(X509_STORE_new());
  Bio bio = MemoryBio(m.ca);
  int cas = 0;
  while (Cert ca{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    X509_STORE_add_cert(store.get(), ca.get());
    ++cas;
  }
  ERR_clear_error();  // the end of the bundle reads as an error
  if (cas == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where("tls.ca", m.ca_path), " holds no certificate"));
  }
  StoreCtx ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr);
  X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx.get()),
                             static_cast<time_t>(now_ns / 1'000'000'000));
  if (X509_verify_cert(ctx.get()) == 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Where("tls.cert", m.cert_path), " does not chain to the CA bundle in ",
                   Where("tls.ca", m.ca_path), ": ",
                   X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()))));
}

}  // namespace

std::string CertificateSummary::Describe() const {
  return absl::StrCat("identity ", common_name, " (", absl::StrJoin(names, ", "), "), ",
                      roles.empty() ? "no role" : absl::StrCat("role ", absl::StrJoin(roles, ", ")),
                      ", CA ", issuer, ", valid until ", Utc(not_after_ns));
}

absl::StatusOr<CertificateSummary> CheckTlsMaterial(const TlsMaterial& m, int64_t now_ns,
                                                    TlsRole role) {
  const std::string where = Where("tls.cert", m.cert_path);
  Bio bio = MemoryBio(m.cert);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, " holds no certificate"));
  }
  absl::StatusOr<Key> key = ReadKey(m);
  if (!key.ok()) return key.status();
  if (X509_check_private_key(cert.get(), key->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        Where("tls.key", m.key_path), " is not the key of the certificate in ", where));
  }
  CertificateSummary s;
  AddNames(cert.get(), &s);
  AddRoles(cert.get(), &s);
  s.issuer = NameText(X509_get_issuer_name(cert.get()));
  s.not_after_ns = NotAfterNs(cert.get());
  time_t now = static_cast<time_t>(now_ns / 1'000'000'000);
  if (X509_cmp_time(X509_get0_notAfter(cert.get()), &now) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, " expired at ", Utc(s.not_after_ns)));
  }
  if (X509_cmp_time(X509_get0_notBefore(cert.get()), &now) > 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, " is not valid yet"));
  }
  s.expires_soon = s.not_after_ns - now_ns < kExpiryWarningNs;
  if (role == TlsRole::kClient) {
    // Not checked against the bundle: a client's bundle is for the servers it dials, which may
    // have another CA than its own certificate; the server judges that one.
    if (X509_check_purpose(cert.get(), X509_PURPOSE_SSL_CLIENT, 0) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is not for TLS client use (extended key usage clientAuth)"));
    }
    return s;
  }
  if (absl::Status chain = CheckChain(m, cert.get(), now_ns); !chain.ok()) return chain;
  // A daemon serves and dials with this one certificate: peers check both uses.
  if (X509_check_purpose(cert.get(), X509_PURPOSE_SSL_SERVER, 0) != 1 ||
      X509_check_purpose(cert.get(), X509_PURPOSE_SSL_CLIENT, 0) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        " is not for both TLS server and client use (extended key usage serverAuth and "
        "clientAuth): a podprof daemon serves and dials with one certificate"));
  }
  return s;
}

}  // namespace podprof::security
