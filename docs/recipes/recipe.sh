#!/usr/bin/env bash
# keygate with curl and openssl (OpenSSL 3): log in, register a new key, then send a signed POST and
# a signed GET.
#
#   KEYGATE_PASSWORD=... bash recipe.sh seed|rfc9421 rsa|ed25519|p256 ...
#
# KEYGATE_URL (default http://127.0.0.1:8080) and KEYGATE_USER (default demo) say where and who.
# GNU date and basenc (coreutils); on macOS, install coreutils and use gdate and gbasenc.
set -euo pipefail
# scheme://host[:port] exactly as curl sends it: RFC 9421's @target-uri is signed with it
BASE=${KEYGATE_URL:-http://127.0.0.1:8080}
SCHEME=${1:-}
[[ $SCHEME == seed || $SCHEME == rfc9421 ]] && (($# > 1)) || { echo 'usage: bash recipe.sh seed|rfc9421 rsa|ed25519|p256 ...' >&2; exit 2; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

# call METHOD TARGET BODY [HEADER...]: sends one request and prints its status and answer
call() {
  local method=$1 target=$2 body=$3 headers=() status
  for header in "${@:4}"; do headers+=(-H "$header"); done
  [[ -n $body ]] && headers+=(-H 'Content-Type: application/json' --data-binary "$body")
  status=$(curl -sS -o "$DIR/answer" -w '%{http_code}' -X "$method" "${headers[@]}" "$BASE$target")
  echo "$status $(cat "$DIR/answer")"
}

# sign: the key type's signature of the bytes on stdin, in base64 on one line: RSA PKCS#1 v1.5
# SHA-256, Ed25519 (openssl reads it from a file), or ECDSA P-256 SHA-256 in DER
sign() {
  case $KEY_TYPE in
    ed25519) cat > "$DIR/data"; openssl pkeyutl -sign -rawin -inkey "$DIR/key.pem" -in "$DIR/data" ;;
    *) openssl dgst -sha256 -sign "$DIR/key.pem" ;;
  esac | openssl base64 -A
}

# der_to_raw: an ECDSA signature in DER, base64 on stdin, as RFC 9421 takes it: r||s, two 32-byte
# big-endian integers, in base64
der_to_raw() {
  openssl base64 -d -A | openssl asn1parse -inform DER | sed -nE 's/.*INTEGER +:([0-9A-F]+)$/\1/p' |
    xargs printf '%64s' | tr ' ' 0 | basenc --base16 -d | openssl base64 -A
}

# seed_headers METHOD TARGET BODY: the X-API-* headers, a signature of timestamp + METHOD + target
# (with its query) + body, nothing between
seed_headers() {
  local timestamp
  timestamp=$(date +%s%3N)   # milliseconds
  SIGNED=("X-API-Key: $API_KEY" "X-API-Timestamp: $timestamp" "X-API-Signature: $(printf %s "$timestamp$1$2$3" | sign)")
}

# rfc9421_headers METHOD TARGET BODY: Signature-Input and Signature over @method, @target-uri and,
# with a body, content-digest and content-type
rfc9421_headers() {
  local components='"@method" "@target-uri"' lines=("\"@method\": $1" "\"@target-uri\": $BASE$2") digest params signature
  SIGNED=()
  if [[ -n $3 ]]; then
    digest="sha-256=:$(printf %s "$3" | openssl dgst -sha256 -binary | openssl base64 -A):"
    components+=' "content-digest" "content-type"'
    lines+=("\"content-digest\": $digest" '"content-type": application/json')
    SIGNED+=("Content-Digest: $digest")
  fi
  params="($components);created=$(date +%s);keyid=\"$API_KEY\";alg=\"$ALG\";nonce=\"$(openssl rand -hex 16)\""
  lines+=("\"@signature-params\": $params")
  # the signature base: the lines joined by "\n", none after the last
  signature=$(IFS=$'\n'; printf %s "${lines[*]}" | sign)
  [[ $KEY_TYPE == p256 ]] && signature=$(printf %s "$signature" | der_to_raw)
  SIGNED+=("Signature-Input: sig1=$params" "Signature: sig1=:$signature:")
}

USER_NAME=${KEYGATE_USER:-demo}
[[ -n ${KEYGATE_PASSWORD:-} ]] || { echo "KEYGATE_PASSWORD is not set: export it with the password of $USER_NAME (KEYGATE_USER)" >&2; exit 2; }
PASSWORD_JSON=$(printf %s "$KEYGATE_PASSWORD" | sed 's/[\\"]/\\&/g')
LOGIN=$(curl -sS "$BASE/v1/auth/token" -H 'Content-Type: application/json' \
  -d "{\"username\":\"$USER_NAME\",\"password\":\"$PASSWORD_JSON\"}")
TOKEN=$(printf %s "$LOGIN" | sed -nE 's/.*"token":"([^"]+)".*/\1/p')
[[ -n $TOKEN ]] || { echo "login refused: $LOGIN" >&2; exit 1; }

for KEY_TYPE in "${@:2}"; do
  # a real client makes its key once, keeps it, and registers it once
  case $KEY_TYPE in
    rsa) openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -quiet -out "$DIR/key.pem"; ALG=rsa-v1_5-sha256 ;;
    ed25519) openssl genpkey -algorithm ed25519 -out "$DIR/key.pem"; ALG=ed25519 ;;
    p256) openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DIR/key.pem"; ALG=ecdsa-p256-sha256 ;;
    *) echo "unknown key type $KEY_TYPE: rsa, ed25519 or p256" >&2; exit 2 ;;
  esac
  NAME=shell-$SCHEME-$KEY_TYPE
  PEM_JSON=$(openssl pkey -in "$DIR/key.pem" -pubout | awk '{printf "%s\\n", $0}')
  # registration proves the private key with its signature over the bytes of the name (ECDSA: DER)
  ANSWER=$(call POST /v1/api-keys "{\"name\":\"$NAME\",\"publicKey\":\"$PEM_JSON\",\"signature\":\"$(printf %s "$NAME" | sign)\"}" \
    "Authorization: Bearer $TOKEN")
  echo "[$SCHEME $KEY_TYPE] register $NAME: $ANSWER"
  [[ $ANSWER == 201* ]] || exit 1
  API_KEY=$(printf %s "$ANSWER" | sed -nE 's/.*"apiKey":"([0-9a-f]+)".*/\1/p')

  # a new tax_id each run: the example service refuses a second client with the same one
  BODY="{\"name\":\"Ada Lovelace\",\"email\":\"ada@example.com\",\"tax_id\":\"$(date +%s%N)\"}"
  for REQUEST in "POST /v1/clients/" "GET /v1/clients/?limit=10"; do
    read -r METHOD TARGET <<< "$REQUEST"
    [[ $METHOD == GET ]] && BODY=
    # sign the very bytes that are sent, and send them as they are (--data-binary, not -d)
    if [[ $SCHEME == seed ]]; then seed_headers "$METHOD" "$TARGET" "$BODY"; else rfc9421_headers "$METHOD" "$TARGET" "$BODY"; fi
    echo "[$SCHEME $KEY_TYPE] $METHOD $TARGET: $(call "$METHOD" "$TARGET" "$BODY" "Authorization: Bearer $TOKEN" "${SIGNED[@]}")"
  done
done
