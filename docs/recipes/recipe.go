// keygate from Go, standard library only: log in, register a new key, then send a signed POST and
// a signed GET.
//
//	KEYGATE_PASSWORD=... go run recipe.go seed|rfc9421 rsa|ed25519|p256 ...
//
// KEYGATE_URL (default http://127.0.0.1:8080) and KEYGATE_USER (default demo) say where and who.
package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// scheme://host[:port] exactly as the requests go out: RFC 9421's @target-uri is signed with it
var base = envOr("KEYGATE_URL", "http://127.0.0.1:8080")

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

// call sends one request and returns its status and answer, an error answer too.
func call(method, target string, body []byte, headers map[string]string) (int, string) {
	request, err := http.NewRequest(method, base+target, bytes.NewReader(body))
	check(err)
	for name, value := range headers {
		request.Header.Set(name, value)
	}
	response, err := http.DefaultClient.Do(request)
	check(err)
	defer response.Body.Close()
	answer, err := io.ReadAll(response.Body)
	check(err)
	return response.StatusCode, string(answer)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

func newKey(keyType string) (key crypto.Signer, err error) {
	switch keyType {
	case "rsa":
		return rsa.GenerateKey(rand.Reader, 2048)
	case "ed25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
		return key, err
	case "p256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return nil, fmt.Errorf("unknown key type %q: rsa, ed25519 or p256", keyType)
}

// sign makes the key type's signature: RSA PKCS#1 v1.5 SHA-256, Ed25519, or ECDSA P-256 SHA-256 in DER.
func sign(key crypto.Signer, data []byte) []byte {
	if _, ok := key.(ed25519.PrivateKey); ok {
		signature, err := key.Sign(nil, data, crypto.Hash(0))
		check(err)
		return signature
	}
	digest := sha256.Sum256(data)
	signature, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
	check(err)
	return signature
}

// seedHeaders are the X-API-* headers: the signature of timestamp + METHOD + target (with its
// query) + body, nothing between.
func seedHeaders(key crypto.Signer, apiKey, method, target string, body []byte) map[string]string {
	timestamp := strconv.FormatInt(time.Now().UnixMilli(), 10)
	signature := sign(key, append([]byte(timestamp+method+target), body...))
	return map[string]string{"X-API-Key": apiKey, "X-API-Timestamp": timestamp, "X-API-Signature": b64(signature)}
}

// algorithm is RFC 9421's alg for the key: each key type has one (an RSA key may also sign rsa-pss-sha512).
func algorithm(key crypto.Signer) string {
	switch key.(type) {
	case *rsa.PrivateKey:
		return "rsa-v1_5-sha256"
	case ed25519.PrivateKey:
		return "ed25519"
	}
	return "ecdsa-p256-sha256"
}

// rfc9421Headers are Signature-Input and Signature over @method, @target-uri and, with a body,
// content-digest and content-type.
func rfc9421Headers(key crypto.Signer, apiKey, method, target string, body []byte) map[string]string {
	components := []string{`"@method"`, `"@target-uri"`}
	lines := []string{`"@method": ` + method, `"@target-uri": ` + base + target}
	headers := map[string]string{}
	if len(body) > 0 {
		sum := sha256.Sum256(body)
		digest := "sha-256=:" + b64(sum[:]) + ":"
		components = append(components, `"content-digest"`, `"content-type"`)
		lines = append(lines, `"content-digest": `+digest, `"content-type": application/json`)
		headers["Content-Digest"] = digest
	}
	nonce := make([]byte, 16)
	_, err := rand.Read(nonce)
	check(err)
	alg := algorithm(key)
	params := fmt.Sprintf(`(%s);created=%d;keyid="%s";alg="%s";nonce="%s"`,
		strings.Join(components, " "), time.Now().Unix(), apiKey, alg, base64.RawURLEncoding.EncodeToString(nonce))
	lines = append(lines, `"@signature-params": `+params)
	// the signature base: the lines joined by "\n", none after the last
	signature := sign(key, []byte(strings.Join(lines, "\n")))
	if alg == "ecdsa-p256-sha256" {
		// RFC 9421 takes r||s, two 32-byte big-endian integers, not DER
		var rs struct{ R, S *big.Int }
		_, err := asn1.Unmarshal(signature, &rs)
		check(err)
		signature = append(rs.R.FillBytes(make([]byte, 32)), rs.S.FillBytes(make([]byte, 32))...)
	}
	headers["Signature-Input"] = "sig1=" + params
	headers["Signature"] = "sig1=:" + b64(signature) + ":"
	return headers
}

func jsonBytes(value any) []byte {
	data, err := json.Marshal(value)
	check(err)
	return data
}

func run(token, scheme, keyType string) {
	key, err := newKey(keyType) // a real client makes its key once, keeps it, and registers it once
	check(err)
	spki, err := x509.MarshalPKIXPublicKey(key.Public())
	check(err)
	name := "go-" + scheme + "-" + keyType
	// registration proves the private key with its signature over the bytes of the name (ECDSA: DER)
	registration := map[string]string{
		"name":      name,
		"publicKey": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spki})),
		"signature": b64(sign(key, []byte(name))),
	}
	bearer := "Bearer " + token
	status, answer := call("POST", "/v1/api-keys", jsonBytes(registration), map[string]string{"Authorization": bearer, "Content-Type": "application/json"})
	fmt.Printf("[%s %s] register %s: %d %s\n", scheme, keyType, name, status, answer)
	if status != 201 {
		os.Exit(1)
	}
	var registered struct{ APIKey string }
	check(json.Unmarshal([]byte(answer), &registered))

	signedHeaders := seedHeaders
	if scheme == "rfc9421" {
		signedHeaders = rfc9421Headers
	}
	// a new tax_id each run: the example service refuses a second client with the same one
	client := map[string]string{"name": "Ada Lovelace", "email": "ada@example.com", "tax_id": strconv.FormatInt(time.Now().UnixNano(), 10)}
	for _, request := range []struct {
		method, target string
		body           []byte
	}{{"POST", "/v1/clients/", jsonBytes(client)}, {"GET", "/v1/clients/?limit=10", nil}} {
		// sign the very bytes that are sent, and send them as they are
		headers := signedHeaders(key, registered.APIKey, request.method, request.target, request.body)
		headers["Authorization"] = bearer
		if len(request.body) > 0 {
			headers["Content-Type"] = "application/json"
		}
		status, answer := call(request.method, request.target, request.body, headers)
		fmt.Printf("[%s %s] %s %s: %d %s\n", scheme, keyType, request.method, request.target, status, answer)
	}
}

func main() {
	if len(os.Args) < 3 || (os.Args[1] != "seed" && os.Args[1] != "rfc9421") {
		log.Fatal("usage: go run recipe.go seed|rfc9421 rsa|ed25519|p256 ...")
	}
	user, password := envOr("KEYGATE_USER", "demo"), os.Getenv("KEYGATE_PASSWORD")
	if password == "" {
		fmt.Fprintf(os.Stderr, "KEYGATE_PASSWORD is not set: export it with the password of %s (KEYGATE_USER)\n", user)
		os.Exit(2)
	}
	credentials := map[string]string{"username": user, "password": password}
	status, answer := call("POST", "/v1/auth/token", jsonBytes(credentials), map[string]string{"Content-Type": "application/json"})
	if status != 200 {
		log.Fatalf("login refused: %d %s", status, answer)
	}
	var login struct{ Token string }
	check(json.Unmarshal([]byte(answer), &login))
	for _, keyType := range os.Args[2:] {
		run(login.Token, os.Args[1], keyType)
	}
}
