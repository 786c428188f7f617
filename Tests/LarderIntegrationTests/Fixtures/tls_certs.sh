#!/bin/sh
# Makes the certificates the HTTPS interception tests serve from their TLS origins, with the
# openssl command line, in directory $1:
#   origin-ca.pem          the origins' own test CA (Larder trusts it through tls.upstream_ca_file)
#   localhost.pem/.key     a valid leaf for DNS:localhost signed by it
#   wrongname.pem/.key     signed by it, but for DNS:wrong.example
#   expired.pem/.key       signed by it for DNS:localhost, valid only in 2020
#   untrusted.pem/.key     self-signed for DNS:localhost (no anchor Larder knows)
set -eu
cd "$1"
ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
openssl req -x509 $ec -keyout origin-ca.key -out origin-ca.pem -days 2 -subj "/CN=Larder test origin CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
leaf() { # name subjectAltName
    openssl req -x509 $ec -keyout "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" -addext "subjectAltName=DNS:$2" \
        -CA origin-ca.pem -CAkey origin-ca.key 2>/dev/null
}
leaf localhost localhost
leaf wrongname wrong.example
openssl req -x509 $ec -keyout untrusted.key -out untrusted.pem -days 2 -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost" 2>/dev/null
# An expired leaf needs dates in the past, which only `openssl ca` sets.
mkdir -p ca-db && : > ca-db/index.txt && echo 01 > ca-db/serial
cat > ca-db/ca.conf <<CONF
[ca]
default_ca = test
[test]
database = ca-db/index.txt
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = any
copy_extensions = copy
[any]
commonName = supplied
CONF
openssl req -new $ec -keyout expired.key -out expired.csr -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost" 2>/dev/null
openssl ca -batch -config ca-db/ca.conf -cert origin-ca.pem -keyfile origin-ca.key -in expired.csr -out expired.pem \
    -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
rm -f expired.csr
