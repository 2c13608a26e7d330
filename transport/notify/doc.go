// Package notify sends the owner's approval notices: an e-mail over SMTP
// (the operator's server) or a chat message, a JSON POST of {"text": ...}
// to an incoming-webhook URL in the shape Slack defines and other chats
// accept.
//
// # Model
//
// Sender implements actors.Messenger. The actors' notifier decides what to
// send and when to retry; Sender turns one actors.ApprovalNotice into one
// message and sends it once. Every message carries a signed link (package
// approvallink) to the approval's console page: bound to the approval id
// and its items_hash, naming the channel it went through, expiring with the
// approval, and single use because the decision it leads to is.
//
// # Safety
//
// Text that an agent chose (the resource path) or that names it (the
// agent's name) is stripped of control characters and clipped before it
// enters a message, so it can add neither a header to an e-mail nor markup
// to a chat message. A chat webhook URL is a bearer secret: errors and logs
// name it only by its redacted form. Credentials for SMTP are sent only
// over TLS (STARTTLS) or to a server on this machine.
//
// # Concurrency
//
// A Sender is safe for concurrent use. It keeps no connection open between
// messages: notices are rare, and an idle connection would outlive the
// service's shutdown.
package notify
