// A local npm package, installed offline into nodeapp.
module.exports = (s) => s.toUpperCase() + '!';
