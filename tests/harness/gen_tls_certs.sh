#!/usr/bin/env bash
# Generates the TLS test certificates into DIR with the openssl command (nothing is committed):
#   ca.pem ca.key                 test CA
#   broker.pem broker.key         CN=localhost, SAN localhost and 127.0.0.1, signed by the CA
#   client.pem client.key         CN=${CLIENT_CN:-tls-client}, signed by the CA (mTLS)
#   client-ROLE.pem client-ROLE.key  CN=ROLE for each ROLE in ${CLIENT_ROLES} (space-separated),
#                                 signed by the CA (AuthenticationProviderTls roles)
#   nocn.pem nocn.key             subject O=magnetar-test (no CN), signed by the CA
#   other-ca.pem                  an unrelated CA
#   other-client.pem other-client.key  CN=stranger, signed by the unrelated CA
#   broker2.pem broker2.key       CN=localhost like broker.pem, signed by the unrelated CA
#   expired.pem expired.key       CN=localhost, signed by the CA, valid only in January 2020
# Usage: gen_tls_certs.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
newkey() { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null; }
# sign NAME CN CA EXT: NAME.csr from NAME.key, signed by CA.pem/CA.key for 30 days
sign() { sign_subject "$1" "/CN=$2" "$3" "$4"; }
sign_subject() {
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial -days 30 \
    -sha256 -extfile <(printf '%s\n' "$4") -out "$1.pem" 2>/dev/null
}
for ca in ca other-ca; do
  newkey $ca.key
  openssl req -x509 -new -key $ca.key -subj "/CN=magnetar-test-$ca" -days 30 -sha256 \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -out $ca.pem
done
newkey broker.key
sign broker localhost ca "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
newkey broker2.key
sign broker2 localhost other-ca "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
newkey client.key
sign client "${CLIENT_CN:-tls-client}" ca "extendedKeyUsage=clientAuth"
for role in ${CLIENT_ROLES:-}; do
  newkey "client-$role.key"
  sign "client-$role" "$role" ca "extendedKeyUsage=clientAuth"
done
newkey nocn.key
sign_subject nocn /O=magnetar-test ca "extendedKeyUsage=clientAuth"
newkey other-client.key
sign other-client stranger other-ca "extendedKeyUsage=clientAuth"
# An expired certificate needs explicit dates: `openssl ca` takes them.
newkey expired.key
openssl req -new -key expired.key -subj /CN=localhost -out expired.csr
mkdir -p ca-db
: > ca-db/index
echo 01 > ca-db/serial
cat > ca-db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca-db/index
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
CNF
openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
  -out expired.pem -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
rm -f ./*.csr ./*.srl
