// Node.js: a module from node_modules, the standard library, and the runtime's version.
const shout = require('shout');
const os = require('os');
const sum = [1, 2, 3, 4].reduce((a, b) => a + b, 0);
console.log(`node: ${shout('hello')} sum=${sum} major=${process.versions.node.split('.')[0]} platform=${os.platform()}`);
