package browsertest

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPasswordChangeInBrowser: the password page, refused and done, passes
// axe-core, and a change keeps the browser that made it signed in.
func TestPasswordChangeInBrowser(t *testing.T) {
	ctx := tab(t)
	w := setup(t)
	w.signIn(t, ctx)
	do(t, ctx, "opening the password page", chromedp.Click(chromedp.CSS(`.account a[href$="/password"]`)),
		chromedp.WaitVisible(chromedp.ID("current_password")))
	checkAccessibility(t, ctx, "password")

	const next = "a new browser test password"
	do(t, ctx, "typing two different new passwords",
		chromedp.SendKeys(chromedp.ID("current_password"), w.password),
		chromedp.SendKeys(chromedp.ID("new_password"), next),
		chromedp.SendKeys(chromedp.ID("new_password_again"), next+"!"),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("password-error")))
	if text := mainText(t, ctx); !strings.Contains(text, "the two new passwords differ") {
		t.Fatalf("refused change:\n%s", text)
	}
	checkAccessibility(t, ctx, "password refused")

	do(t, ctx, "changing the password",
		chromedp.SendKeys(chromedp.ID("current_password"), w.password),
		chromedp.SendKeys(chromedp.ID("new_password"), next),
		chromedp.SendKeys(chromedp.ID("new_password_again"), next),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	if text := mainText(t, ctx); !strings.Contains(text, "Your password is changed") {
		t.Fatalf("after the change:\n%s", text)
	}
	checkAccessibility(t, ctx, "password changed")
	do(t, ctx, "opening the inbox, still signed in", chromedp.Navigate(w.srv.URL+"/console/approvals"),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label=Console]`)))
}
