// keygate from Java, the JDK only (17 or later, no build tool): log in, register a new key, then send
// a signed POST and a signed GET.
//
//   KEYGATE_PASSWORD=... java Recipe.java seed|rfc9421 rsa|ed25519|p256 ...
//
// KEYGATE_URL (default http://127.0.0.1:8080) and KEYGATE_USER (default demo) say where and who.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.spec.ECGenParameterSpec;
import java.time.Instant;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class Recipe {
  // scheme://host[:port] exactly as the requests go out: RFC 9421's @target-uri is signed with it
  static final String BASE = System.getenv().getOrDefault("KEYGATE_URL", "http://127.0.0.1:8080");
  static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  record Answer(int status, String body) {}

  /** Sends one request; returns its status and answer, an error answer too. */
  static Answer call(String method, String target, byte[] body, Map<String, String> headers) throws Exception {
    var request = HttpRequest.newBuilder(URI.create(BASE + target))
        .method(method, body.length == 0 ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body));
    headers.forEach(request::header);
    var response = HTTP.send(request.build(), HttpResponse.BodyHandlers.ofString());
    return new Answer(response.statusCode(), response.body());
  }

  static String b64(byte[] data) {
    return Base64.getEncoder().encodeToString(data);
  }

  /** A JSON string: quoted, with its backslashes, quotes and newlines escaped (JSON is no part of the JDK). */
  static String quote(String text) {
    return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
  }

  /** A string member of a JSON answer. */
  static String member(String json, String name) {
    Matcher match = Pattern.compile("\"" + name + "\":\"([^\"]*)\"").matcher(json);
    if (!match.find()) throw new IllegalStateException("no " + name + " in " + json);
    return match.group(1);
  }

  static KeyPair newKey(String keyType) throws Exception {
    switch (keyType) {
      case "rsa": {
        var generator = KeyPairGenerator.getInstance("RSA");
        generator.initialize(2048);
        return generator.generateKeyPair();
      }
      case "ed25519":
        return KeyPairGenerator.getInstance("Ed25519").generateKeyPair();
      case "p256": {
        var generator = KeyPairGenerator.getInstance("EC");
        generator.initialize(new ECGenParameterSpec("secp256r1"));
        return generator.generateKeyPair();
      }
      default:
        throw new IllegalArgumentException("unknown key type " + keyType + ": rsa, ed25519 or p256");
    }
  }

  /**
   * The key type's signature: RSA PKCS#1 v1.5 SHA-256, Ed25519, or ECDSA P-256 SHA-256, in DER
   * for the seed scheme and registration and as r||s (P1363) for RFC 9421.
   */
  static byte[] sign(PrivateKey key, byte[] data, boolean rfc9421) throws Exception {
    String algorithm = switch (key.getAlgorithm()) {
      case "RSA" -> "SHA256withRSA";
      case "EC" -> rfc9421 ? "SHA256withECDSAinP1363Format" : "SHA256withECDSA";
      default -> "Ed25519";
    };
    var signer = Signature.getInstance(algorithm);
    signer.initSign(key);
    signer.update(data);
    return signer.sign();
  }

  /** X-API-*: the signature of timestamp + METHOD + target (with its query) + body, nothing between. */
  static Map<String, String> seedHeaders(PrivateKey key, String apiKey, String method, String target, byte[] body) throws Exception {
    String timestamp = String.valueOf(System.currentTimeMillis());
    byte[] head = (timestamp + method + target).getBytes(StandardCharsets.UTF_8);
    byte[] signingString = new byte[head.length + body.length];
    System.arraycopy(head, 0, signingString, 0, head.length);
    System.arraycopy(body, 0, signingString, head.length, body.length);
    return new HashMap<>(Map.of("X-API-Key", apiKey, "X-API-Timestamp", timestamp, "X-API-Signature", b64(sign(key, signingString, false))));
  }

  /** Signature-Input and Signature over @method, @target-uri and, with a body, content-digest and content-type. */
  static Map<String, String> rfc9421Headers(PrivateKey key, String apiKey, String method, String target, byte[] body) throws Exception {
    String components = "\"@method\" \"@target-uri\"";
    String base = "\"@method\": " + method + "\n\"@target-uri\": " + BASE + target + "\n";
    var headers = new HashMap<String, String>();
    if (body.length > 0) {
      String digest = "sha-256=:" + b64(MessageDigest.getInstance("SHA-256").digest(body)) + ":";
      components += " \"content-digest\" \"content-type\"";
      base += "\"content-digest\": " + digest + "\n\"content-type\": application/json\n";
      headers.put("Content-Digest", digest);
    }
    // RFC 9421's alg for the key: each key type has one (an RSA key may also sign rsa-pss-sha512)
    String alg = switch (key.getAlgorithm()) {
      case "RSA" -> "rsa-v1_5-sha256";
      case "EC" -> "ecdsa-p256-sha256";
      default -> "ed25519";
    };
    byte[] nonce = new byte[16];
    new SecureRandom().nextBytes(nonce);
    String params = "(" + components + ");created=" + System.currentTimeMillis() / 1000 + ";keyid=\"" + apiKey + "\";alg=\"" + alg +
        "\";nonce=\"" + Base64.getUrlEncoder().withoutPadding().encodeToString(nonce) + "\"";
    base += "\"@signature-params\": " + params; // the signature base: no newline after the last line
    headers.put("Signature-Input", "sig1=" + params);
    headers.put("Signature", "sig1=:" + b64(sign(key, base.getBytes(StandardCharsets.UTF_8), true)) + ":");
    return headers;
  }

  static void run(String token, String scheme, String keyType) throws Exception {
    KeyPair key = newKey(keyType); // a real client makes its key once, keeps it, and registers it once
    String publicPem = "-----BEGIN PUBLIC KEY-----\n" +
        Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(key.getPublic().getEncoded()) + "\n-----END PUBLIC KEY-----\n";
    String name = "java-" + scheme + "-" + keyType;
    // registration proves the private key with its signature over the bytes of the name (ECDSA: DER)
    String registration = "{\"name\":" + quote(name) + ",\"publicKey\":" + quote(publicPem) + ",\"signature\":" +
        quote(b64(sign(key.getPrivate(), name.getBytes(StandardCharsets.UTF_8), false))) + "}";
    String bearer = "Bearer " + token;
    Answer registered = call("POST", "/v1/api-keys", registration.getBytes(StandardCharsets.UTF_8),
        Map.of("Authorization", bearer, "Content-Type", "application/json"));
    System.out.println("[" + scheme + " " + keyType + "] register " + name + ": " + registered.status() + " " + registered.body());
    if (registered.status() != 201) System.exit(1);
    String apiKey = member(registered.body(), "apiKey");

    // a new tax_id each run: the example service refuses a second client with the same one
    Instant now = Instant.now();
    String client = String.format("{\"name\":\"Ada Lovelace\",\"email\":\"ada@example.com\",\"tax_id\":\"%d%09d\"}", now.getEpochSecond(), now.getNano());
    for (var request : List.of(List.of("POST", "/v1/clients/", client), List.of("GET", "/v1/clients/?limit=10", ""))) {
      String method = request.get(0);
      String target = request.get(1);
      byte[] body = request.get(2).getBytes(StandardCharsets.UTF_8);
      // sign the very bytes that are sent, and send them as they are
      Map<String, String> headers = scheme.equals("seed")
          ? seedHeaders(key.getPrivate(), apiKey, method, target, body)
          : rfc9421Headers(key.getPrivate(), apiKey, method, target, body);
      headers.put("Authorization", bearer);
      if (body.length > 0) headers.put("Content-Type", "application/json");
      Answer answer = call(method, target, body, headers);
      System.out.println("[" + scheme + " " + keyType + "] " + method + " " + target + ": " + answer.status() + " " + answer.body());
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 2 || !List.of("seed", "rfc9421").contains(args[0])) {
      System.err.println("usage: java Recipe.java seed|rfc9421 rsa|ed25519|p256 ...");
      System.exit(2);
    }
    String user = System.getenv().getOrDefault("KEYGATE_USER", "demo");
    String password = System.getenv().getOrDefault("KEYGATE_PASSWORD", "");
    if (password.isEmpty()) {
      System.err.println("KEYGATE_PASSWORD is not set: export it with the password of " + user + " (KEYGATE_USER)");
      System.exit(2);
    }
    String credentials = "{\"username\":" + quote(user) + ",\"password\":" + quote(password) + "}";
    Answer login = call("POST", "/v1/auth/token", credentials.getBytes(StandardCharsets.UTF_8), Map.of("Content-Type", "application/json"));
    if (login.status() != 200) {
      System.err.println("login refused: " + login.status() + " " + login.body());
      System.exit(1);
    }
    for (int i = 1; i < args.length; i++) run(member(login.body(), "token"), args[0], args[i]);
  }
}
