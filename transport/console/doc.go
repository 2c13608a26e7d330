// Package console is the owner console: HTML pages, served by the same
// binary and listener as the API under the path of console_url, where an
// owner signs in with e-mail and password and decides approvals, reads
// spends and receipts, pauses agents, edits rules, manages keys and sees
// what each agent spent per day against its cap.
//
// # Model
//
// Pages are rendered on the server with html/template; the stylesheet is
// embedded (embed.FS), there is no script and nothing is fetched from
// another host, so the console works offline. Every change is a form POST
// answered with a redirect to a page (or, when a key secret must be shown
// once, with that page itself). The console acts through
// actors.OwnerPrincipal and calls the same System methods as the owner
// API, so quotas, rate limits, events and durability are the same.
//
// # Sessions
//
// Sign-in checks the argon2id hash stored on the owner (a PHC string, as
// `guard owner create` writes it). A session id is 32 random bytes in an
// HttpOnly, SameSite=Strict cookie; only its SHA-256 digest is stored, in
// the journal, so a restart keeps owners signed in. A session ends after
// IdleTimeout without a request, SessionLifetime after sign-in, or at
// sign-out, all on the service clock. Failed and successful sign-ins alike
// pass a rate limit per client IP and per e-mail, and every failure gets
// the same message.
//
// # Forgery
//
// Every POST carries a token and passes an Origin check. Signed-in forms
// carry the session's synchronizer token. The sign-in form and the
// confirmation page of a signed approval link carry an HMAC, under a key
// made at start, of a nonce held in a SameSite=Strict cookie (and, for a
// link, of the link id and approval id): a page of another site can
// neither read the token nor make the browser send the cookie.
//
// # Signed links
//
// {console_url}/approvals/{id}?link=TOKEN opens without a session: the
// token (package approvallink) must verify, name this approval and its
// items_hash, and not be expired on the approval's own clock; a forged,
// damaged or expired link and a link to an approval already decided are
// refused with a page that says so. The decision records the link's
// channel and link id.
//
// # Headers
//
// Every page sends a Content-Security-Policy without script, frame
// refusal, Cache-Control: no-store and Referrer-Policy: same-origin. The
// referrer policy is not no-referrer on purpose: browsers send
// "Origin: null" on form POSTs of a no-referrer page, which would defeat
// the Origin check; same-origin still never tells another site the URL
// (and so never leaks a link token).
package console
