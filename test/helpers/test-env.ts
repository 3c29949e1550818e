// What every keygate a test starts gets unless the test says otherwise: password hashes at the
// lowest cost keygate takes (KEYGATE_PASSWORD_SCRYPT_LOG_N=14, 8 times cheaper than the default 17),
// as Rails' tests hash with bcrypt's minimum cost: at the default, scrypt was half the CPU time of
// the tests that log in. The default cost is tested where it is the behaviour:
// test/unit/gateway/users/passwords.test.ts and user-service.test.ts, and the login timing figures
// (test/chaos/login-enumeration.chaos.ts).
import { SCRYPT_LOG_N_MIN } from '../../gateway/src/config/env.js'

export const TEST_SCRYPT_LOG_N = SCRYPT_LOG_N_MIN
export const TEST_ENV: Record<string, string> = {
  KEYGATE_PASSWORD_SCRYPT_LOG_N: String(TEST_SCRYPT_LOG_N),
  // Node's compile cache (test/helpers/compile-cache.mjs), for processes started with an env of their own
  ...(process.env.NODE_COMPILE_CACHE !== undefined && { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE })
}
