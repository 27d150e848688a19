// runwarden's post step (action.yml `runs.post`): the runner runs it at
// the end of the job for every use of the action. Only a `mode: watch`
// step left a token for it (`runwarden_watch` in $GITHUB_STATE, given back
// here as STATE_runwarden_watch): then it runs the shim, which runs
// `runwarden action` to finish that watch; otherwise it does nothing. A
// file of its own, so that a main step can never take itself for a post
// step whatever the environment says.
"use strict";
const token = process.env.STATE_runwarden_watch;
if (!token) process.exit(0);
// Handed over in this process only, never through the environment: an
// earlier step can put anything in the environment ($GITHUB_ENV).
globalThis.runwardenPostWatch = token;
require("./index.js");
