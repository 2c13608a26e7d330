package console

import (
	"context"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/ratelimit"
)

// The console password is the owner's main credential: it decides
// approvals, and it is the way back to the API when every owner key is
// gone. An owner who fears it leaked replaces it here; the operator sets a
// forgotten one with "guard owner set-password".

// The password page is parsed with the others, at New.
func init() { pageNames = append(pageNames, "password") }

type passwordData struct {
	Done  string
	Error string
	// Field is the input the error is about ("current", "new", "again").
	Field string
	Min   int
}

// passwordChanged is the notice after a change.
const passwordChanged = "Your password is changed. Every other browser signed in as you was signed out and needs the new password; this one stays signed in."

func (c *Console) passwordPage(r *request) error {
	d := passwordData{Min: MinPasswordLength}
	if query(r, "done") != "" {
		d.Done = passwordChanged
	}
	return c.ok(r, "password", "Password", d)
}

// passwordSet replaces the signed-in owner's password once the current
// one is proved. The checks that reveal nothing about the current password
// come first and cost no guess.
func (c *Console) passwordSet(r *request) error {
	current, pw, again := form(r, "current_password"), form(r, "new_password"), form(r, "new_password_again")
	refuse := func(status int, field, msg string) error {
		c.render(r, status, "password", "Password", "", passwordData{Error: msg, Field: field, Min: MinPasswordLength})
		return nil
	}
	if len(current) > MaxPasswordLength {
		return refuse(401, "current", errWrongCurrent)
	}
	if err := CheckNewPassword(pw); err != nil {
		return refuse(400, "new", "The password was not changed: "+err.Error()+".")
	}
	if again != pw {
		return refuse(400, "again", "The password was not changed: the two new passwords differ. Type the same new password in both fields.")
	}
	// A wrong current password is a guess at it, from a browser that may
	// have been left signed in: it counts against the sign-in limit of the
	// client's address, which the sign-in page shares (it takes the bucket
	// with no principal, the practice side, whichever environment the
	// session shows), and against one of the owner's own. Only a signed-in
	// browser reaches that one, and sign-in never reads it: no stranger
	// can fill it to keep the owner out.
	anon := *r
	anon.who = actors.Principal{}
	if err := c.limit(&anon, ratelimit.SignIn, "ip|"+r.ctx.RemoteIP().String()); err != nil {
		return err
	}
	if err := c.limit(&anon, ratelimit.SignIn, "email|"+r.owner.Email); err != nil {
		return err
	}
	if r.owner.PasswordHash == "" || !VerifyPassword(r.owner.PasswordHash, current) {
		return refuse(401, "current", errWrongCurrent)
	}
	if pw == current {
		return refuse(400, "new", "The password was not changed: the new password is the current one. Choose another.")
	}
	// The browser that made the change goes on in a fresh session rather
	// than its old one: whoever may hold a copy of the old cookie (the
	// reason to change a password may be a browser left open elsewhere,
	// or a stolen cookie) is signed out along with every other session,
	// and the owner, who has just proved the password, stays signed in.
	token := randomToken()
	cs := actors.ConsoleSession{OwnerID: r.sess.OwnerID, Env: r.sess.Env, CSRF: randomToken()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hash := HashPassword(pw)
	if err := c.sys.ChangeOwnerPassword(ctx, r.sess.OwnerID, hash, r.sess.digest, digestOf(token), cs); err != nil {
		return fromActors(err, "The password was not changed")
	}
	c.setCookie(r.ctx, sessionCookie, token, c.cookiePath(), 0)
	// The new password forgets every known browser but this one.
	owner := r.owner
	owner.PasswordHash = hash
	c.rememberDevice(r, owner)
	return redirect(c.base + "/password?done=1")
}

// errWrongCurrent is the answer to a wrong current password.
const errWrongCurrent = "The password was not changed: the current password is not right. Type the password you sign in with."
