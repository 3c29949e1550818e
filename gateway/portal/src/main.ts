// The developer portal's entry point (bundled by gateway/src/portal/assets.ts).
const app = document.getElementById('app')
if (app !== null) app.textContent = 'keygate developer portal'
